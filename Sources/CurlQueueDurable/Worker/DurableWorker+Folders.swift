import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DurableWorker {
    /// Makes the folders of `destination` (relative to `folder`, validated at enqueue: no `..`,
    /// not absolute) one component at a time, 0700, never through a symbolic link: a link
    /// planted at `sub` (to `/etc`, say) would otherwise take a job's `sub/f.bin` outside the
    /// worker's folder. Returns why not, or nil.
    static func makeFolders(of destination: String, in folder: URL) -> String? {
        // The worker's own folder is the user's choice: made if missing, links and all.
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var path = folder.path
        for part in destination.split(separator: "/").dropLast() {
            path += "/" + part
            if mkdir(path, 0o700) == 0 { continue }
            let code = errno
            var info = stat()
            guard code == EEXIST, lstat(path, &info) == 0 else {
                return "cannot create the folder \(path): \(String(cString: strerror(code)))"
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                let what = (info.st_mode & S_IFMT) == S_IFLNK ? "a symbolic link" : "not a folder"
                return "\(path) is \(what): a download never goes through it"
            }
        }
        return nil
    }
}
