/// The names of the extended attributes CurlQueue keeps on its files, spelled once for the
/// core, the durable worker and `curlq`.
package enum PartFileAttribute {
    /// A `.part` file's validator (a strong `ETag` or a `Last-Modified`), sent as `If-Range`
    /// when it is resumed; kept on a finished file only while the durable worker records it.
    package static let validator = "user.curlqueue.validator"
    /// The durable worker's mark on a finished file whose outcome it has not recorded yet:
    /// `BOOT JOB` (DurableWorker+UnrecordedFile.swift).
    package static let finished = "user.curlqueue.finished"
    /// The URL whose bytes a `.part` holds, for a file with mirrors (`curlq get`'s
    /// `MirrorRules` and the durable worker's ``Request/partFileSource``).
    package static let source = "user.curlq.source"
}
