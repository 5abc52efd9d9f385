import CSQLite
import Foundation

/// An SQLite error: the result code and SQLite's message.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The (extended) result code, e.g. SQLITE_BUSY (5), SQLITE_FULL (13), SQLITE_READONLY (8).
    public var code: Int32
    /// SQLite's message for it.
    public var message: String
    public var description: String { "SQLite error \(code): \(message)" }

    /// SQLITE_BUSY or SQLITE_LOCKED, primary or extended.
    var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
}

/// One SQLite connection: a thin wrapper over the C API, used by one thread at a time (the
/// store's serial queue). Statements are prepared once and cached by their text.
final class SQLiteConnection {
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

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

    private static func error(_ code: Int32, _ db: OpaquePointer?) -> SQLiteError {
        let message = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
        return SQLiteError(code: code, message: message)
    }

    /// Runs SQL text with no parameters and no rows (several statements allowed).
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: text)
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
            case .text(let value): code = sqlite3_bind_text(statement, position, value, -1, csqlite_transient())
            case .blob(let value):
                code = value.withUnsafeBytes { buffer in
                    sqlite3_bind_blob(statement, position, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count), csqlite_transient())
                }
            }
            guard code == SQLITE_OK else { throw Self.error(code, handle) }
        }
        var rows: [SQLiteRow] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw Self.error(sqlite3_extended_errcode(handle), handle) }
            var values: [SQLiteValue] = []
            let count = sqlite3_column_count(statement)
            values.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: values.append(.real(sqlite3_column_double(statement, column)))
                case SQLITE_TEXT: values.append(.text(String(cString: sqlite3_column_text(statement, column))))
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
            rows.append(SQLiteRow(values: values))
        }
        return rows
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes(handle)) }

    private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw Self.error(code, handle) }
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

/// A value bound to or read from SQLite.
enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// One result row.
struct SQLiteRow: Sendable {
    var values: [SQLiteValue]
    func int(_ index: Int) -> Int64? {
        if case .integer(let value) = values[index] { return value }
        return nil
    }
    func text(_ index: Int) -> String? {
        if case .text(let value) = values[index] { return value }
        return nil
    }
    func blob(_ index: Int) -> Data? {
        switch values[index] {
        case .blob(let value): value
        case .text(let value): Data(value.utf8)
        default: nil
        }
    }
}
