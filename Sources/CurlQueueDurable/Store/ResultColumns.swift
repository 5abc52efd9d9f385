/// The columns of one statement's result, by name (`sqlite3_column_name`, `PQfname`), shared by
/// its rows: what the stores' row decoders look a column up in.
package final class ResultColumns: Sendable {
    /// The statement, for errors (never its bound values).
    package let sql: String
    package let names: [String]
    private let index: [String: Int]

    package init(sql: String, names: [String]) {
        self.sql = sql
        self.names = names
        // The first of two equal names wins, as SQLite's lookups by name and `PQfnumber` do.
        self.index = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    package func position(of name: String) -> Int? { index[name] }
}
