import CSQLite
import CurlQueueDurable
import Foundation

/// An SQLite error: the result code, SQLite's message and the statement that failed.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The (extended) result code, e.g. SQLITE_BUSY (5), SQLITE_FULL (13), SQLITE_READONLY (8);
    /// SQLITE_MISMATCH (20) for a result row the store cannot read (a column missing or of
    /// another type).
    public var code: Int32
    /// SQLite's message for it.
    public var message: String
    /// The statement that failed, as written in the store (its bound values, which may hold
    /// secrets, are never part of it); `nil` when the error is not a statement's.
    public var sql: String?
    public var description: String {
        "SQLite error \(code): \(message)" + (sql.map { " (in: \(Self.oneLine($0)))" } ?? "")
    }

    /// The statement on one line: its runs of white space as one space.
    static func oneLine(_ sql: String) -> String {
        sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// SQLITE_BUSY or SQLITE_LOCKED, primary or extended.
    var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
}

/// One SQLite connection: a thin wrapper over the C API, used by one thread at a time (the
/// store's serial queue). Statements are prepared once and cached by their text.
final class SQLiteConnection {
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    /// The result columns of each prepared statement, by its text (names read once).
    private var resultColumns: [String: ResultColumns] = [:]

    /// Opens (creating if needed) the database at `path`. The file is created 0600 before SQLite
    /// opens it; SQLite gives its `-wal` and `-shm` files the database file's permissions.
    init(path: String, busyTimeoutMilliseconds: Int32) throws(SQLiteError) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        close(descriptor)
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let code = sqlite3_open_v2(path, &db, flags, nil)
        handle = db
        guard code == SQLITE_OK else {
            let error = Self.error(code, db)
            sqlite3_close_v2(db)
            handle = nil
            throw error
        }
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    private static func error(_ code: Int32, _ db: OpaquePointer?, sql: String? = nil) -> SQLiteError {
        let message = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
        return SQLiteError(code: code, message: message, sql: sql)
    }

    /// Runs SQL text with no parameters and no rows (several statements allowed).
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: text, sql: sql)
        }
    }

    /// Runs one statement with `arguments` bound in order and returns its rows.
    @discardableResult
    func query(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) -> [SQLiteRow] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, argument) in arguments.enumerated() {
            let position = Int32(index + 1)
            let code: Int32
            switch argument {
            case .null: code = sqlite3_bind_null(statement, position)
            case .integer(let value): code = sqlite3_bind_int64(statement, position, value)
            case .real(let value): code = sqlite3_bind_double(statement, position, value)
            case .text(var value):
                // With its byte length (not -1, which ends the text at its first NUL); copied.
                code = value.withUTF8 { buffer in
                    guard let base = buffer.baseAddress else {
                        return sqlite3_bind_text64(statement, position, "", 0, csqlite_transient(), UInt8(SQLITE_UTF8))
                    }
                    return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { text in
                        sqlite3_bind_text64(statement, position, text, UInt64(buffer.count), csqlite_transient(), UInt8(SQLITE_UTF8))
                    }
                }
            case .blob(let value):
                code = value.withUnsafeBytes { buffer in
                    sqlite3_bind_blob64(statement, position, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(buffer.count),
                                        csqlite_transient())
                }
            }
            guard code == SQLITE_OK else { throw Self.error(code, handle, sql: sql) }
        }
        var rows: [SQLiteRow] = []
        var columns: ResultColumns?
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw Self.error(sqlite3_extended_errcode(handle), handle, sql: sql) }
            var values: [SQLiteValue] = []
            let count = sqlite3_column_count(statement)
            values.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: values.append(.real(sqlite3_column_double(statement, column)))
                case SQLITE_TEXT:
                    // The text, then its length in bytes (the order SQLite's documentation asks
                    // for): all of it, NUL characters included.
                    let text = sqlite3_column_text(statement, column)
                    let length = Int(sqlite3_column_bytes(statement, column))
                    values.append(.text(String(decoding: UnsafeBufferPointer(start: text, count: text == nil ? 0 : length), as: UTF8.self)))
                case SQLITE_BLOB:
                    let length = Int(sqlite3_column_bytes(statement, column))
                    if let bytes = sqlite3_column_blob(statement, column), length > 0 {
                        values.append(.blob(Data(bytes: bytes, count: length)))
                    } else {
                        values.append(.blob(Data()))
                    }
                default: values.append(.null)
                }
            }
            let rowColumns = columns ?? self.columns(of: statement, sql: sql)
            columns = rowColumns
            rows.append(SQLiteRow(values: values, columns: rowColumns))
        }
        return rows
    }

    /// The statement's result columns by name (`sqlite3_column_name`), read once per statement.
    private func columns(of statement: OpaquePointer, sql: String) -> ResultColumns {
        let count = Int(sqlite3_column_count(statement))
        if let known = resultColumns[sql], known.names.count == count { return known }
        let names = (0..<count).map { column in
            sqlite3_column_name(statement, Int32(column)).map { String(cString: $0) } ?? ""
        }
        let columns = ResultColumns(sql: sql, names: names)
        resultColumns[sql] = columns
        return columns
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes(handle)) }

    private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw Self.error(code, handle, sql: sql) }
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in a transaction begun with `begin` (`BEGIN IMMEDIATE` for writes: the write
    /// lock is taken at the start, so a transaction never fails half-way to upgrade its lock),
    /// committed when it returns, rolled back when it throws.
    func transaction<T>(_ begin: String = "BEGIN IMMEDIATE", _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if sqlite3_get_autocommit(handle) == 0 { try? execute("ROLLBACK") }
            throw error
        }
    }
}
