import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// SIGINT (Ctrl-C) and SIGTERM, caught with dispatch sources (and SIGTSTP/SIGCONT, see
/// `jobControl`): the first one interrupts the
/// running batch, whose transfers are cancelled with their `.part` files kept, and the
/// command then prints its summary and exits with 128 + the signal (130 or 143). A second
/// signal exits at once (the cursor shown again first).
final class SignalTrap: @unchecked Sendable {  // safe: `state` is only touched with `lock` held
    private let queue = DispatchQueue(label: "curlq.signals")
    private let lock = NSLock()
    private var state: (runner: BatchRunner?, received: Int32?) = (nil, nil)
    private var sources: [any DispatchSourceSignal] = []

    static let signals = [SIGINT, SIGTERM]
    /// Ctrl-Z and `fg`/`bg`: the display gives the terminal back before the process stops, and
    /// draws itself again when it continues.
    static let jobControl = [SIGTSTP, SIGCONT]

    init() {
        for number in Self.signals + Self.jobControl {
            signal(number, SIG_IGN)  // delivered to the dispatch source instead (SIGCONT still continues)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [weak self] in
                switch number {
                case SIGTSTP: self?.stop()
                case SIGCONT: self?.continued()
                default: self?.received(number)
                }
            }
            source.resume()
            sources.append(source)
        }
    }

    /// SIGTSTP: cursor and terminal restored, then the process stops (SIGSTOP, which the shell
    /// reports as it does Ctrl-Z).
    private func stop() {
        let runner = lock.withLock { state.runner }
        runner?.suspendDisplay()
        kill(getpid(), SIGSTOP)
    }

    private func continued() {
        lock.withLock { state.runner }?.resumeDisplay()
    }

    /// The signal received so far, if any.
    var received: Int32? { lock.withLock { state.received } }

    /// The batch a signal interrupts; one that comes before it interrupts it at once.
    func watch(_ runner: BatchRunner) {
        let pending = lock.withLock { () -> Int32? in
            state.runner = runner
            return state.received
        }
        if let pending { runner.interrupt(.signal(pending)) }
    }

    private func received(_ number: Int32) {
        let (runner, first) = lock.withLock { () -> (BatchRunner?, Bool) in
            let first = state.received == nil
            if first { state.received = number }
            return (state.runner, first)
        }
        guard first else {
            if runner?.usesTerminal == true { Output.error("\n" + Terminal.showCursor) }
            Output.error("curlq: \(Interruption.signal(number).description) again: exiting now\n")
            _exit(ExitStatus.interrupted(by: number))
        }
        runner?.interrupt(.signal(number))
    }

    /// Restores the default handling of the signals.
    func cancel() {
        for source in sources { source.cancel() }
        for number in Self.signals + Self.jobControl { signal(number, SIG_DFL) }
    }
}
