import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The folders of a download's path inside its output folder (`dir=`, a daemon's `sub/f.bin`).
package enum Subfolders {
    /// Makes the folders of `destination` (relative to `folder`, validated before: no `..`,
    /// not absolute) one component at a time, 0700, never through a symbolic link: a link
    /// planted at `sub` (to `/etc`, say) would otherwise take `sub/f.bin` outside the folder.
    /// The output folder itself is the user's choice: made if missing, links and all.
    /// Returns why not, or nil.
    package static func make(of destination: String, in folder: String) -> String? {
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var path = folder
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        for part in destination.split(separator: "/").dropLast() {
            path += "/" + part
            if mkdir(path, 0o700) == 0 { continue }
            let code = errno
            guard code == EEXIST else {
                return "cannot create the folder \(path): \(String(cString: strerror(code)))"
            }
            switch FileKind.of(path) {
            case .directory: continue
            case .symbolicLink: return "\(path) is a symbolic link: a download never goes through it"
            default: return "\(path) is not a folder: a download never goes through it"
            }
        }
        return nil
    }
}
