import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `-s/--split` keeps next to a split download's `.part` file, as `NAME.part.ranges`: the
/// validator and length of the file the `.part` holds pieces of, and how far each range got.
/// A rerun resumes each range from there when the server still announces the same validator
/// and length; anything else (no sidecar, bad JSON, ranges that do not tile the file, a `.part`
/// of another size) starts the file over. Written atomically (a temporary file renamed over it).
struct SplitSidecar: Codable, Equatable {
    struct Piece: Codable, Equatable {
        /// The first and last byte of the range, inclusive.
        var first: Int64
        var last: Int64
        /// Bytes of the range written from `first` on.
        var done: Int64

        var length: Int64 { last - first + 1 }
        var isComplete: Bool { done == length }
        /// Where the next byte of the range goes.
        var next: Int64 { first + done }
    }

    var version = 1
    var validator: String
    var total: Int64
    var ranges: [Piece]

    /// The most ranges a file is split into.
    static let maxRanges = 64

    /// `total` bytes cut into `count` ranges of nearly equal size (fewer for a tiny file).
    static func fresh(validator: String, total: Int64, count: Int) -> SplitSidecar {
        let count = Int64(max(1, min(count, maxRanges)))
        let pieces = max(1, min(count, total))
        let size = total / pieces
        var ranges: [Piece] = []
        var first: Int64 = 0
        for index in 0..<pieces {
            let last = index == pieces - 1 ? total - 1 : first + size - 1
            ranges.append(Piece(first: first, last: last, done: 0))
            first = last + 1
        }
        return SplitSidecar(validator: validator, total: total, ranges: ranges)
    }

    /// Whether the ranges tile `0..<total` in order, each with a possible progress: only such a
    /// sidecar is believed, so no write can go outside the file or leave a hole unnoticed.
    var isSound: Bool {
        guard version == 1, total > 0, total <= 1 << 50, !ranges.isEmpty, ranges.count <= Self.maxRanges,
              !validator.isEmpty, validator.utf8.count <= 1024, validator.utf8.allSatisfy({ (0x20...0x7E).contains($0) })
        else { return false }
        var expected: Int64 = 0
        for piece in ranges {
            guard piece.first == expected, piece.last >= piece.first, piece.last < total,
                  piece.done >= 0, piece.done <= piece.length else { return false }
            expected = piece.last + 1
        }
        return expected == total
    }

    var doneBytes: Int64 { ranges.reduce(0) { $0 + $1.done } }
    var isComplete: Bool { ranges.allSatisfy(\.isComplete) }

    static func path(forPart part: String) -> String { part + ".ranges" }

    /// The sidecar at `path` if it is a small regular file holding a sound one; nil otherwise
    /// (a link, a FIFO, a huge file or bad JSON are never followed or believed).
    static func read(_ path: String) -> SplitSidecar? {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size < 64 * 1024,
              let data = FileManager.default.contents(atPath: path),
              let sidecar = try? JSONDecoder().decode(SplitSidecar.self, from: data), sidecar.isSound
        else { return nil }
        return sidecar
    }

    /// Writes the sidecar atomically: a crash leaves the old one or the new one, never half.
    func write(_ path: String) {
        guard let data = try? JSONEncoder().encode(self) else { return }
        try? data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    static func remove(_ path: String) {
        var info = stat()
        if lstat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFDIR { unlink(path) }
    }
}
