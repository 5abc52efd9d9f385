import CurlQueueDurable
import Foundation

extension DurableWorker.Configuration {
    /// A worker for tests in this process: a heartbeat every second, a claim poll every 100 ms
    /// and maintenance every 500 ms, so that a test waits fractions of a second, not minutes.
    static func forTests(_ folder: URL) -> Self {
        var configuration = Self(folder: folder)
        configuration.heartbeatInterval = .seconds(1)
        configuration.pollInterval = .milliseconds(100)
        configuration.maintenanceInterval = .milliseconds(500)
        return configuration
    }
}
