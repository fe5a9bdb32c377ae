from __future__ import annotations


class ImportFormatError(Exception):
    """A file that cannot be imported. The message names file, row and column where known.

    Rows are 1-based data rows as a spreadsheet shows them (the header is row 1, so the first
    data row of a CSV is row 2); Parquet rows are 1-based record numbers.
    """

    def __init__(
        self, message: str, *, file: str, row: int | None = None, column: str | None = None
    ) -> None:
        self.file = file
        self.row = row
        self.column = column
        self.detail = message
        super().__init__(self.render())

    def with_row(self, row: int) -> ImportFormatError:
        """This error at row, unless it names a row already: a problem of the header found
        without knowing whether the file has one (a CSV's header is row 1; Parquet has none)."""
        if self.row is not None:
            return self
        return ImportFormatError(self.detail, file=self.file, row=row, column=self.column)

    def render(self) -> str:
        where = [f"file {self.file}"]
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column {self.column}")
        return f"{', '.join(where)}: {self.detail}"
