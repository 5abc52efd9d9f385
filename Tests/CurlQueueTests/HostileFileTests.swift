import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a hostile file system entry does to a transfer: a FIFO given as a request body or
/// standing where a `.part` file is resumed, a symbolic or hard link planted at `.part`, a
/// destination that is a link. None may block the engine thread (which runs every transfer of
/// the process), and none may have the server's bytes written outside the destination folder.
@Suite struct HostileFileTests {
    /// Runs `operation` while a request to 127.0.0.1 goes through the same engine: the unrelated
    /// request must complete within 10 s. When it has not, both ends of the FIFO are opened (so
    /// that an `open(2)` blocked on it returns and the test ends instead of hanging) and the
    /// test fails.
    func expectEngineNotBlocked(
        by operation: RequestOperation, fifo: String, server: FixtureServer
    ) async -> Result<Response, RequestError> {
        async let outcome = completion(of: operation)
        let unrelated = RequestOperation(request: Request(url: server.url("/bytes/10?unrelated=1")))
        let opened = LockedBox<[Int32]>([])
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await unrelated.response()) != nil }
            group.addTask {
                // The limit is the event that ends a blocked engine: 10 s is 100 times what the
                // request takes here, ThreadSanitizer included.
                try? await Task.sleep(for: .seconds(10))
                if Task.isCancelled { return true }
                // Kept open to the end: the engine may write into the FIFO (64 KiB fit).
                opened.update { $0 = [open(fifo, O_RDONLY | O_NONBLOCK), open(fifo, O_WRONLY | O_NONBLOCK)] }
                return false
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
        #expect(finished, "an unrelated request did not complete in 10 s: the engine thread was blocked")
        let result = await outcome
        for descriptor in opened.value where descriptor >= 0 { close(descriptor) }
        return result
    }

    @Test func aFIFOAsARequestBodyFailsAtOnceAndNeverBlocksTheEngine() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let fifo = folder.appendingPathComponent("body").path
        #expect(mkfifo(fifo, 0o600) == 0)
        try await withServer { (server) async throws in
            var request = Request(url: server.url("/echo"), method: .post)
            request.body = .file(URL(fileURLWithPath: fifo))
            let result = await expectEngineNotBlocked(by: RequestOperation(request: request), fifo: fifo, server: server)
            guard case .failure(.invalidRequest(let message)) = result else {
                Issue.record("expected invalidRequest, got \(result)")
                return
            }
            #expect(message.contains("not a regular file"), "\(message)")
            #expect(!server.requests.contains { $0.path == "/echo" }, "nothing was sent")
        }
    }

    @Test func aFIFOAtThePartFileIsReplacedAndNeverBlocksTheEngine() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let destination = folder.appendingPathComponent("file")
        let fifo = destination.path + ".part"
        #expect(mkfifo(fifo, 0o600) == 0)
        try await withServer { (server) async throws in
            var request = Request(url: server.url("/bytes/50000"), destination: destination)
            request.resume = true
            let result = await expectEngineNotBlocked(by: RequestOperation(request: request), fifo: fifo, server: server)
            #expect((try? result.get())?.status == .ok, "\(result)")
            #expect(Array(try Data(contentsOf: destination)) == FixtureServer.expectedBytes(count: 50_000))
            #expect(try FileManager.default.attributesOfItem(atPath: destination.path)[.type] as? FileAttributeType == .typeRegular)
            #expect(!FileManager.default.fileExists(atPath: fifo))
            #expect(server.requests.first { $0.path.hasPrefix("/bytes/") }?.header("Range") == nil, "a FIFO is not resumed")
        }
    }

    /// A `.part` that is a symbolic link to a file outside the folder, with `resume` on: the
    /// link goes, a file of its own takes its place, and the file outside is untouched.
    @Test func aSymbolicLinkAtThePartFileIsReplacedAndItsTargetIsUntouched() async throws {
        try await withFolderAndVictim { setup in
            let folder = setup.folder
            let destination = folder.appendingPathComponent("file")
            #expect(symlink(setup.victim.path, destination.path + ".part") == 0)
            try await withServer { (server) async throws in
                var request = Request(url: server.url("/bytes/50000"), destination: destination)
                request.resume = true
                let result = await completion(of: RequestOperation(request: request))
                #expect((try? result.get())?.status == .ok, "\(result)")
                #expect(setup.victimIsUntouched)
                #expect(Array(try Data(contentsOf: destination)) == FixtureServer.expectedBytes(count: 50_000))
                var info = stat()
                #expect(lstat(destination.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG, "the destination is a file of its own")
                #expect(server.requests.first { $0.path.hasPrefix("/bytes/") }?.header("Range") == nil, "a link is not resumed")
            }
        }
    }

    /// A `.part` that is a hard link to a file elsewhere: appending would write into that file.
    @Test func aHardLinkAtThePartFileIsReplacedAndTheOtherNameIsUntouched() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let elsewhere = folder.appendingPathComponent("elsewhere")
        let secret = Data("do not append to me".utf8)
        try secret.write(to: elsewhere)
        let destination = folder.appendingPathComponent("file")
        #expect(link(elsewhere.path, destination.path + ".part") == 0)
        try await withServer { (server) async throws in
            var request = Request(url: server.url("/bytes/50000"), destination: destination)
            request.resume = true
            let result = await completion(of: RequestOperation(request: request))
            #expect((try? result.get())?.status == .ok, "\(result)")
            #expect(try Data(contentsOf: elsewhere) == secret)
            #expect(Array(try Data(contentsOf: destination)) == FixtureServer.expectedBytes(count: 50_000))
        }
    }

    /// A destination that is a symbolic link to a file outside the folder: the finished
    /// download replaces the link; the file it pointed to is untouched.
    @Test func aDestinationThatIsASymbolicLinkIsReplacedNotFollowed() async throws {
        try await withFolderAndVictim { setup in
            let folder = setup.folder
            let destination = folder.appendingPathComponent("file")
            #expect(symlink(setup.victim.path, destination.path) == 0)
            try await withServer { (server) async throws in
                let result = await completion(of: RequestOperation(request: Request(url: server.url("/bytes/1000"), destination: destination)))
                #expect((try? result.get())?.status == .ok, "\(result)")
                #expect(setup.victimIsUntouched)
                var info = stat()
                #expect(lstat(destination.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG)
                #expect(Array(try Data(contentsOf: destination)) == FixtureServer.expectedBytes(count: 1000))
            }
        }
    }

    /// A `.part` swapped for a link to a file outside the folder while the body arrives: the
    /// link is not renamed into place, and the file outside is untouched.
    @Test func aPartFileSwappedForALinkMidBodyIsNotMovedIntoPlace() async throws {
        try await withFolderAndVictim { setup in
            let folder = setup.folder
            let destination = folder.appendingPathComponent("file")
            let part = destination.path + ".part"
            try await withServer { (server) async throws in
                let operation = RequestOperation(request: Request(
                    url: server.url("/bytes/100000?chunk=10000&holdAt=30000&gate=swap"), destination: destination))
                // Progress reaching 30,000 bytes is the event: the server holds the rest at the gate.
                let swapped = LockedBox(false)
                operation.downloadProgressHandler = { progress in
                    guard progress.bytesTransferred >= 30_000, !swapped.update({ let was = $0; $0 = true; return was }) else { return }
                    _ = rename(part, folder.appendingPathComponent("moved").path)
                    _ = symlink(setup.victim.path, part)
                    server.openGate("swap")
                }
                let result = await completion(of: operation)
                #expect(swapped.value)
                #expect(result.failure == .fileSystem("\(part) was replaced while the body was written to it: not moved to \(destination.path)"), "\(result)")
                #expect(setup.victimIsUntouched)
                #expect(!FileManager.default.fileExists(atPath: destination.path))
            }
        }
    }
}
