import CSQLite
import CurlQueueDurable
import Foundation

/// A value bound to or read from SQLite. Text is UTF-8 with its length, so a NUL character
/// is kept both ways.
enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    /// How an error names it.
    var typeName: String {
        switch self {
        case .null: "NULL"
        case .integer: "an integer"
        case .real: "a real"
        case .text: "text"
        case .blob: "a blob"
        }
    }
}

/// A column's value as a Swift type: `nil` when the value is of another type. NULL is a value
/// only of `Optional`.
protocol SQLiteColumnValue {
    init?(sqlite value: SQLiteValue)
}

extension Int64: SQLiteColumnValue {
    init?(sqlite value: SQLiteValue) {
        guard case .integer(let integer) = value else { return nil }
        self = integer
    }
}

extension Int: SQLiteColumnValue {
    init?(sqlite value: SQLiteValue) {
        guard case .integer(let integer) = value, let exact = Int(exactly: integer) else { return nil }
        self = exact
    }
}

extension Bool: SQLiteColumnValue {
    /// 0 or 1, as the schema stores flags.
    init?(sqlite value: SQLiteValue) {
        guard case .integer(let integer) = value, integer == 0 || integer == 1 else { return nil }
        self = integer == 1
    }
}

extension String: SQLiteColumnValue {
    init?(sqlite value: SQLiteValue) {
        guard case .text(let text) = value else { return nil }
        self = text
    }
}

extension Data: SQLiteColumnValue {
    /// A blob, or text's UTF-8 bytes.
    init?(sqlite value: SQLiteValue) {
        switch value {
        case .blob(let data): self = data
        case .text(let text): self = Data(text.utf8)
        default: return nil
        }
    }
}

extension Optional: SQLiteColumnValue where Wrapped: SQLiteColumnValue {
    init?(sqlite value: SQLiteValue) {
        if case .null = value {
            self = .none
        } else if let wrapped = Wrapped(sqlite: value) {
            self = .some(wrapped)
        } else {
            return nil
        }
    }
}

/// One result row, read by column name: a query's column order does not matter, and a column
/// that is missing or of another type is an ``SQLiteError`` naming it and the statement.
struct SQLiteRow: Sendable {
    let values: [SQLiteValue]
    let columns: ResultColumns

    /// The column `name` as `T` (an `Optional` reads NULL as `nil`).
    func decode<T: SQLiteColumnValue>(_ name: String, as type: T.Type = T.self) throws(SQLiteError) -> T {
        guard let position = columns.position(of: name), position < values.count else {
            throw SQLiteError(
                code: SQLITE_MISMATCH,
                message: "the result has no column \"\(name)\" (it has \(columns.names.joined(separator: ", ")))",
                sql: columns.sql)
        }
        let value = values[position]
        guard let decoded = T(sqlite: value) else {
            throw SQLiteError(
                code: SQLITE_MISMATCH, message: "the column \"\(name)\" holds \(value.typeName), not \(T.self)", sql: columns.sql)
        }
        return decoded
    }

    /// The column `name`, a JSON document (blob or text), decoded as `T`; NULL is `nil`.
    func decodeJSON<T: Decodable>(_ name: String, as type: T.Type, with decoder: JSONDecoder) throws(SQLiteError) -> T? {
        guard let data = try decode(name, as: Data?.self) else { return nil }
        do {
            return try decoder.decode(type, from: data)
        } catch {
            throw SQLiteError(
                code: SQLITE_MISMATCH, message: "the column \"\(name)\" does not hold a \(T.self): \(error)", sql: columns.sql)
        }
    }
}
