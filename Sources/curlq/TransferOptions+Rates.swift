import ArgumentParser
import CurlQueue
import CurlQueueDownloads

extension Rate {
    /// `value` parsed for `option`, or a usage error that says what is accepted.
    static func parse(_ value: String?, option: String) throws -> Int64? {
        guard let value else { return nil }
        guard let rate = parse(value) else {
            throw ValidationError("\(option) takes bytes per second, as 500K, 2M or 1G (K = 1024), not \(quoted(value))")
        }
        return rate
    }
}

extension TransferOptions {
    /// The speed options checked together: a per-file or per-transfer share of the overall
    /// limit below the lowest speed would fail every transfer.
    func validateRates(jobs: Int) throws {
        let limit = try Rate.parse(limitRate, option: "--limit-rate")
        let overall = try Rate.parse(maxOverallRate, option: "--max-overall-rate")
        let lowest = try Rate.parse(speedLimit, option: "--speed-limit")
        guard speedTime.isFinite, speedTime >= 1, speedTime <= 1e6 else {
            throw ValidationError("--speed-time must be a number of seconds, 1 or more, not \(speedTime)")
        }
        if let lowest, let limit, limit < lowest {
            throw ValidationError("--limit-rate \(limitRate!) is below --speed-limit \(speedLimit!): every file would fail as too slow")
        }
        if let lowest, let overall, jobs > 0, overall / Int64(jobs) < lowest {
            throw ValidationError("--max-overall-rate \(maxOverallRate!) shared by -j \(jobs) files is below --speed-limit \(speedLimit!): files would fail as too slow")
        }
    }

    /// The speed options into `options`.
    func applyRates(to options: inout BatchOptions) throws {
        options.limitRate = try Rate.parse(limitRate, option: "--limit-rate")
        options.overallRate = try Rate.parse(maxOverallRate, option: "--max-overall-rate").map { SharedRateLimit(bytesPerSecond: $0) }
        if let lowest = try Rate.parse(speedLimit, option: "--speed-limit") {
            options.lowSpeed = Request.Timeouts.LowSpeed(
                bytesPerSecond: Int(clamping: lowest), duration: .seconds(Int64(speedTime.rounded(.up))))
        }
    }
}

extension Request {
    /// The batch's speed options on a file's request.
    mutating func applyRates(_ options: BatchOptions) {
        timeouts.lowSpeed = options.lowSpeed
        maxReceiveSpeed = options.limitRate
        sharedReceiveLimit = options.overallRate
    }
}
