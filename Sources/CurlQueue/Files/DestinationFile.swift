import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where a download to a file writes: `<destination>.part`, renamed to the destination once
/// the transfer is complete and successful. A file never stands under its final name before
/// it is whole, whatever happens to the process.
///
/// Confined to the engine thread. The `.part` file is opened at the first body byte of a 2xx
/// response (so error responses create no file), in append mode when the server honoured the
/// `Range` the transfer asked for, created anew otherwise.
///
/// Whatever stands at `<destination>.part` is never followed or waited for: only a regular file
/// with no other link is resumed; anything else there (a symbolic link, a hard link to a file
/// elsewhere, a FIFO, a device) is removed and a new file created in its place, opened with
/// `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat`. So a planted link cannot have the
/// server's bytes written outside the folder, and no `open(2)` can block the engine thread.
///
/// A writer holds an exclusive `flock` on its `.part` for as long as it has it open. A `.part`
/// locked by another transfer (another process, such as a durable worker that lost its job to
/// another while it was stopped, or another operation of this one) is never resumed or appended
/// to: this transfer starts a file of its own in its place, and the other one's writes go to
/// the file it opened, now without a name, never into this one's or the finished file.
struct DestinationFile {
    let destination: URL
    let partPath: String
    /// Bytes of a previous attempt to ask the server for the rest of (0 = ask for everything).
    let resumeOffset: Int64
    /// The validator (a strong `ETag`, else `Last-Modified`) of the response the `.part` file
    /// holds the start of, kept with it (``validatorAttribute``): a resume sends it as
    /// `If-Range`, so a file that changed on the server comes whole (200) instead of its new
    /// bytes being appended to the old ones.
    let resumeValidator: String?
    private var descriptor: Int32 = -1
    /// The device and inode of the file opened for writing: the rename moves only that file.
    private var written: (device: UInt, inode: UInt)?
    private(set) var bytesWritten: Int64 = 0
    /// The digests asked for (``Request/fileDigests``).
    private let digestAlgorithms: Set<DigestAlgorithm>
    /// Running digests of the file, from its first byte; nil when none were asked for, or when
    /// the file was resumed (its first bytes were not written by this transfer).
    private var digests: FileDigests?
    /// The digests of the file committed, when they were computed as it was written.
    private(set) var finishedDigests: [DigestAlgorithm: String] = [:]
    /// Whether the finished file keeps the validator (``Request/keepsValidatorOnFile``).
    private let keepsValidator: Bool
    /// Written on the `.part` when it is opened (``Request/partFileSource``).
    private let source: String?

    /// The extended attribute of a `.part` file that holds its validator. Where the file system
    /// keeps no extended attributes, a resume goes without `If-Range`, as before.
    static let validatorAttribute = PartFileAttribute.validator

    /// Prepares the destination; reads the size of an existing `.part` when resuming, and
    /// removes it otherwise: a `.part` file that is not resumed now must not be resumed by a
    /// later attempt either, which would append this download to bytes of another one.
    init(
        destination: URL, resume: Bool, digests: Set<DigestAlgorithm> = [], keepsValidator: Bool = false, source: String? = nil
    ) throws(RequestError) {
        self.destination = destination
        self.source = source
        self.keepsValidator = keepsValidator
        self.digestAlgorithms = digests
        self.partPath = destination.path + ".part"
        let directory = destination.deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .fileSystem("destination folder \(directory) does not exist")
        }
        var info = stat()
        if resume, lstat(partPath, &info) == 0, Self.isResumable(info), !Self.isBeingWritten(partPath) {
            resumeOffset = Int64(info.st_size)
            resumeValidator = resumeOffset > 0 ? Self.readValidator(partPath) : nil
        } else {
            resumeValidator = nil
            resumeOffset = 0
            if !resume, lstat(partPath, &info) == 0, (info.st_mode & S_IFMT) != S_IFDIR { unlink(partPath) }
        }
    }

    var isOpen: Bool { descriptor >= 0 }

    /// A `.part` that may be appended to: a regular file with no other name, which a hard link
    /// planted there could otherwise give to a file outside the folder.
    private static func isResumable(_ info: stat) -> Bool {
        (info.st_mode & S_IFMT) == S_IFREG && info.st_nlink == 1
    }

    /// Whether another transfer has the `.part` at `path` open for writing (it holds the lock).
    private static func isBeingWritten(_ path: String) -> Bool {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { _ = Glibc.close(fd) }
        return flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    /// Opens the `.part` file for a response body: appending when `append`, else a new file.
    mutating func open(append: Bool) throws(RequestError) {
        // O_NOFOLLOW: a symbolic link is refused, not followed. O_NONBLOCK: a FIFO opens at once
        // (or fails with ENXIO) instead of waiting for a reader; fstat then refuses it.
        let fd: Int32
        if append {
            fd = Glibc.open(partPath, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        } else {
            // Whatever stands there goes (a link goes, not its target); the new file is ours
            // (O_EXCL), so nothing planted after the unlink is written through either.
            var existing = stat()
            if lstat(partPath, &existing) == 0, unlink(partPath) != 0, errno != ENOENT {
                throw .fileSystem("cannot replace \(partPath): \(String(cString: strerror(errno)))")
            }
            fd = Glibc.open(partPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw .fileSystem("cannot open \(partPath): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0, Self.isResumable(info), !append || Int64(info.st_size) == resumeOffset else {
            _ = Glibc.close(fd)
            throw .fileSystem(append ? "\(partPath) changed while resuming" : "\(partPath) is not a regular file of its own")
        }
        // Held until the descriptor is closed (the kernel drops it when the process dies).
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            _ = Glibc.close(fd)
            throw .fileSystem("\(partPath) is being written by another transfer")
        }
        descriptor = fd
        written = (UInt(info.st_dev), UInt(info.st_ino))
        if let source { _ = source.withCString { fsetxattr(fd, PartFileAttribute.source, $0, strlen($0), 0) } }
        bytesWritten = append ? resumeOffset : 0
        digests = append && resumeOffset > 0 ? nil : FileDigests(digestAlgorithms)
    }

    /// Keeps `validator` with the `.part` file just opened from empty, or removes the one an
    /// earlier download left: the file holds the start of this response now.
    func recordValidator(_ validator: String?) {
        guard descriptor >= 0 else { return }
        if let validator {
            _ = validator.withCString { fsetxattr(descriptor, Self.validatorAttribute, $0, strlen($0), 0) }
        } else {
            _ = fremovexattr(descriptor, Self.validatorAttribute)
        }
    }

    /// The validator kept with the `.part` file at `path`, if it is one a header can carry.
    private static func readValidator(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 1025)
        let count = lgetxattr(path, validatorAttribute, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let value = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return isUsableValidator(value) ? value : nil
    }

    /// Printable ASCII of at most 1 KiB: what may go into an `If-Range` header as it is.
    static func isUsableValidator(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 1024 && value.utf8.allSatisfy { (0x20...0x7E).contains($0) }
    }

    /// Writes all of `bytes`.
    mutating func write(_ bytes: UnsafeRawBufferPointer) throws(RequestError) {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw .fileSystem("cannot write \(partPath): \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        digests?.update(bytes)
        bytesWritten += Int64(bytes.count)
    }

    /// Closes the `.part` file and moves it to the destination, atomically.
    mutating func commit() throws(RequestError) {
        if descriptor < 0 { try open(append: false) }  // an empty body writes nothing
        finishedDigests = digests?.finish() ?? [:]
        digests = nil
        // The finished file carries none, unless asked to keep it.
        if !keepsValidator { _ = fremovexattr(descriptor, Self.validatorAttribute) }
        close()
        // The name must still be the file written: a link or another file swapped in for it
        // while the body arrived is not moved into place.
        var info = stat()
        guard lstat(partPath, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
              let written, UInt(info.st_dev) == written.device, UInt(info.st_ino) == written.inode else {
            throw .fileSystem("\(partPath) was replaced while the body was written to it: not moved to \(destination.path)")
        }
        guard rename(partPath, destination.path) == 0 else {
            throw .fileSystem("cannot move \(partPath) to \(destination.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Closes the `.part` file, keeping it for a later resume.
    mutating func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    /// Removes the `.part` file (its content cannot be resumed), unless the name now stands for
    /// another transfer's file.
    mutating func discard() {
        close()
        var info = stat()
        if let written, lstat(partPath, &info) == 0, UInt(info.st_dev) != written.device || UInt(info.st_ino) != written.inode {
            return
        }
        unlink(partPath)
    }
}
