"""ISO 4217 currency codes a bill can be in: the codes of ISO 4217 list one that name a
currency (not the fund codes, precious metals, SDR, test or "no currency" codes), plus codes
withdrawn since 2018 that older bills may still carry (HRK, SLL, ZWL, CUC, VEF, MRO, STD).

A billing file naming any other code fails its import: "XYZ" is a typo or a placeholder, and
booking it as a currency would put its amounts in a bucket no FX rate converts."""

from __future__ import annotations

_CODES = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN
    BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD
    FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY
    KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP
    MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR
    RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT
    TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER
    ZAR ZMW ZWG
    HRK SLL ZWL CUC VEF MRO STD
"""
ISO_4217_CODES = frozenset(_CODES.split())
