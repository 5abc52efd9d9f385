internal import Foundation
internal import CurlQueueDurable

/// A column's value (PostgreSQL's text form) as a Swift type: `nil` when it is not one. NULL
/// is a value only of `Optional`.
protocol PGColumnValue {
    init?(postgres text: String?)
}

extension String: PGColumnValue {
    init?(postgres text: String?) {
        guard let text else { return nil }
        self = text
    }
}

extension Int64: PGColumnValue {
    init?(postgres text: String?) {
        guard let text, let value = Int64(text) else { return nil }
        self = value
    }
}

extension Int: PGColumnValue {
    init?(postgres text: String?) {
        guard let text, let value = Int(text) else { return nil }
        self = value
    }
}

extension Double: PGColumnValue {
    init?(postgres text: String?) {
        guard let text, let value = Double(text) else { return nil }
        self = value
    }
}

extension Bool: PGColumnValue {
    /// `t` or `f`, PostgreSQL's text form of a boolean.
    init?(postgres text: String?) {
        switch text {
        case "t": self = true
        case "f": self = false
        default: return nil
        }
    }
}

extension Optional: PGColumnValue where Wrapped: PGColumnValue {
    init?(postgres text: String?) {
        if let text {
            guard let wrapped = Wrapped(postgres: text) else { return nil }
            self = .some(wrapped)
        } else {
            self = .none
        }
    }
}

/// One result row, read by column name: a query's column order does not matter, and a column
/// that is missing or of another type is a ``PostgresStoreError`` naming it and the statement.
struct PGRow: Sendable {
    /// Each column's text; `nil` is SQL NULL.
    let values: [String?]
    let columns: ResultColumns

    /// The column `name` as `T` (an `Optional` reads NULL as `nil`).
    func decode<T: PGColumnValue>(_ name: String, as type: T.Type = T.self) throws(PostgresStoreError) -> T {
        guard let position = columns.position(of: name), position < values.count else {
            throw PostgresStoreError(
                kind: .server, message: "the result has no column \"\(name)\" (it has \(columns.names.joined(separator: ", ")))",
                sql: columns.sql)
        }
        let text = values[position]
        guard let value = T(postgres: text) else {
            // (Never the value itself: a row may hold what a log should not.)
            let what = text == nil ? "NULL, not \(T.self)" : "a value that is not \(T.self)"
            throw PostgresStoreError(kind: .server, message: "the column \"\(name)\" holds \(what)", sql: columns.sql)
        }
        return value
    }

    /// The column `name`, a JSON document, decoded as `T`; NULL is `nil`.
    func decodeJSON<T: Decodable>(_ name: String, as type: T.Type) throws(PostgresStoreError) -> T? {
        guard let text = try decode(name, as: String?.self) else { return nil }
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw PostgresStoreError(kind: .server, message: "the column \"\(name)\" does not hold a \(T.self): \(error)", sql: columns.sql)
        }
    }
}
