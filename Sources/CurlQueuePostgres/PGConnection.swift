internal import CLibPQ
internal import CurlQueueDurable
#if canImport(Glibc)
internal import Glibc
#endif

/// An error from PostgreSQL or from the way to it.
public struct PostgresStoreError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, broadly.
    public enum Kind: Sendable, Equatable {
        /// The server could not be reached, or the connection broke (the statement's outcome may
        /// be unknown: it may have committed). The store reconnects, with backoff, on the next call.
        case unavailable
        /// The server refused the statement (`sqlState` says why), or its result could not be
        /// read (no `sqlState`: a column missing or of another type than the store expects).
        /// A text value with a NUL character is refused before it is sent, with `sqlState`
        /// 22021, as the server refuses one.
        case server
        /// The URL (or `key=value` string) is malformed: nothing was tried. Trying again
        /// cannot help.
        case invalidURL
    }
    /// What went wrong, broadly: whether trying again can help.
    public var kind: Kind
    /// The SQLSTATE code for `.server`, such as `40001`.
    public var sqlState: String?
    /// libpq's or the server's message.
    public var message: String
    /// The statement that failed, as written in the store (its parameters, which may hold
    /// secrets, are never part of it); `nil` when the error is not a statement's (a connect).
    public var sql: String?
    public var description: String {
        let text =
            switch kind {
            case .unavailable: "PostgreSQL unavailable: \(message)"
            case .server: "PostgreSQL error \(sqlState ?? "?"): \(message)"
            case .invalidURL: "invalid PostgreSQL URL: \(message)"
            }
        return text + (sql.map { " (in: \($0.split(whereSeparator: \.isWhitespace).joined(separator: " ")))" } ?? "")
    }
}

/// One libpq connection. Not thread-safe: each is confined to one serial queue (`PGLane`).
/// libpq's API blocks, which is why it never runs on Swift's cooperative pool.
final class PGConnection {
    private let handle: OpaquePointer
    /// The result columns of each statement, by its text (names read once per connection).
    private var resultColumns: [String: ResultColumns] = [:]

    /// Connects; `conninfo` is a URL (`postgres://user@host:port/db`) or key=value pairs.
    init(conninfo: String, connectTimeout: Int = 5) throws(PostgresStoreError) {
        // connect_timeout bounds a connect to a server that is gone; keepalives find a dead peer.
        let options = conninfo.contains("://")
            ? conninfo + (conninfo.contains("?") ? "&" : "?") + "connect_timeout=\(connectTimeout)&keepalives_idle=10&keepalives_interval=5&keepalives_count=3"
            : conninfo + " connect_timeout=\(connectTimeout) keepalives_idle=10 keepalives_interval=5 keepalives_count=3"
        guard let handle = PQconnectdb(options) else {
            throw PostgresStoreError(kind: .unavailable, message: "out of memory")
        }
        self.handle = handle
        // libpq prints the server's notices and warnings to standard error by default (each
        // connection a crash cuts says "terminating connection due to immediate shutdown"): a
        // library writes nothing to its user's stderr. The errors that matter are thrown.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        if PQstatus(handle) != CONNECTION_OK {
            // (deinit closes the handle: it runs for an initializer that throws once every
            // property is set.)
            throw PostgresStoreError(kind: .unavailable, message: Self.errorMessage(handle))
        }
    }

    deinit { PQfinish(handle) }

    /// Checks that `conninfo` parses (libpq's own parser, so exactly what a connect accepts)
    /// and that its ports are numbers, without connecting; throws `.invalidURL` with the reason.
    /// libpq's connection options that take one of a few words (PostgreSQL 15's documentation).
    static let enumeratedOptions: [String: Set<String>] = [
        "sslmode": ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"],
        "gssencmode": ["disable", "prefer", "require"],
        "target_session_attrs": ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"],
        "load_balance_hosts": ["disable", "random"],
    ]

    static func validate(conninfo: String) throws(PostgresStoreError) {
        var reason: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &reason) else {
            let message = reason.map { String(cString: $0).trimmingTrailingWhitespace() } ?? "out of memory"
            if let reason { PQfreemem(reason) }
            throw PostgresStoreError(kind: .invalidURL, message: message)
        }
        defer { PQconninfoFree(options) }
        // The parser takes any text for a port; libpq checks it only when it connects, and then
        // reports it as a failed connection. A port is a number: say so now.
        var option = options
        while let keyword = option.pointee.keyword {
            // Options whose values libpq checks only when it connects, reported then as an
            // unreachable server: a mistyped value is the command line's mistake (exit 2).
            if let allowed = enumeratedOptions[String(cString: keyword)], let value = option.pointee.val,
               !allowed.contains(String(cString: value)) {
                throw PostgresStoreError(
                    kind: .invalidURL,
                    message: "\(String(cString: keyword))=\(String(cString: value)) is not one of \(allowed.sorted().joined(separator: ", "))")
            }
            if String(cString: keyword) == "port", let value = option.pointee.val {
                let ports = String(cString: value)
                for port in ports.split(separator: ",", omittingEmptySubsequences: false) where !port.isEmpty {
                    guard let number = Int(port), (1...65535).contains(number) else {
                        throw PostgresStoreError(kind: .invalidURL, message: "the port \"\(port)\" is not a number from 1 to 65535")
                    }
                }
            }
            option += 1
        }
    }

    var isBroken: Bool { PQstatus(handle) != CONNECTION_OK }

    /// The connection's socket, for `poll` (LISTEN).
    var socket: Int32 { PQsocket(handle) }

    /// Runs one statement (or, without parameters, several separated by `;`) and returns its
    /// rows, in text form, read by column name. `nil` is SQL NULL, both ways. A parameter with
    /// a NUL character is refused (`.server`, SQLSTATE 22021) before anything is sent: libpq
    /// would end it there, and PostgreSQL's text cannot hold one.
    @discardableResult
    func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresStoreError) -> [PGRow] {
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = PQexec(handle, sql)
        } else {
            if let position = parameters.firstIndex(where: { $0?.utf8.contains(0) == true }) {
                throw PostgresStoreError(
                    kind: .server, sqlState: "22021",
                    message: "parameter $\(position + 1) holds a NUL character, which PostgreSQL's text cannot hold", sql: sql)
            }
            let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
            defer { copies.forEach { free($0) } }
            result = copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
                PQexecParams(handle, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
        guard let result else {
            throw PostgresStoreError(kind: isBroken ? .unavailable : .server, message: Self.errorMessage(handle), sql: sql)
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = String(cString: PQresultErrorMessage(result))
            // A lost connection shows as a fatal error with no SQLSTATE, or as a broken status;
            // class 57P (admin shutdown, crash shutdown) and 08 (connection exception) too.
            let lost = isBroken || state == nil || state!.hasPrefix("57P") || state!.hasPrefix("08")
            throw PostgresStoreError(kind: lost ? .unavailable : .server, sqlState: state,
                                     message: message.trimmingTrailingWhitespace(), sql: sql)
        }
        let rows = Int(PQntuples(result)), count = Int(PQnfields(result))
        guard rows > 0 else { return [] }
        let columns = self.columns(of: result, count: count, sql: sql)
        var out: [PGRow] = []
        out.reserveCapacity(rows)
        for row in 0..<rows {
            var values: [String?] = []
            values.reserveCapacity(count)
            for column in 0..<count {
                if PQgetisnull(result, Int32(row), Int32(column)) != 0 {
                    values.append(nil)
                } else {
                    // All of its bytes (PQgetlength), not up to a first NUL.
                    let length = Int(PQgetlength(result, Int32(row), Int32(column)))
                    let bytes = UnsafeRawBufferPointer(start: PQgetvalue(result, Int32(row), Int32(column)), count: length)
                    values.append(String(decoding: bytes, as: UTF8.self))
                }
            }
            out.append(PGRow(values: values, columns: columns))
        }
        return out
    }

    /// The result's columns by name (`PQfname`), read once per statement text.
    private func columns(of result: OpaquePointer, count: Int, sql: String) -> ResultColumns {
        if let known = resultColumns[sql], known.names.count == count { return known }
        let columns = ResultColumns(sql: sql, names: (0..<count).map { column in
            PQfname(result, Int32(column)).map { String(cString: $0) } ?? ""
        })
        resultColumns[sql] = columns
        return columns
    }

    /// Reads what the server sent and returns the notifications among it.
    func drainNotifications() throws(PostgresStoreError) -> [(channel: String, payload: String)] {
        if PQconsumeInput(handle) == 0 {
            throw PostgresStoreError(kind: .unavailable, message: Self.errorMessage(handle))
        }
        var notices: [(channel: String, payload: String)] = []
        while let notice = PQnotifies(handle) {
            notices.append((String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
            PQfreemem(notice)
        }
        return notices
    }

    private static func errorMessage(_ handle: OpaquePointer) -> String {
        String(cString: PQerrorMessage(handle)).trimmingTrailingWhitespace()
    }
}

extension String {
    fileprivate func trimmingTrailingWhitespace() -> String {
        var s = Substring(self)
        while let last = s.last, last.isWhitespace { s.removeLast() }
        return String(s)
    }
}
