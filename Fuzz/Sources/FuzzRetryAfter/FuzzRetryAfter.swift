@testable import CurlQueue
import Foundation

/// A `Retry-After` value as a server sends it, read by `RetryAfter.delay(_:now:)`, the call the
/// retry decision makes: delay-seconds (`120`) or an HTTP-date in any of its three forms.
///
/// Checked: the delay is never negative. Delay-seconds (digits only, after trimming
/// whitespace) always parse, to exactly that many seconds up to nine digits and to 999,999,999
/// seconds beyond. An HTTP-date lies in years 1 to 9999, the delay is the time from `now` to it
/// rounded up to a millisecond, and it shrinks by as much as `now` moves on. Each parsed date
/// from 1601 on, written back by Foundation's calendar in each of the three forms, parses to
/// the same date (all but 9999-12-31T23:59:60, which would be written back in year 10000).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRetryAfter(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let value = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let delay = RetryAfter.delay(value, now: now)
    let later = RetryAfter.delay(value, now: now.addingTimeInterval(laterBy))
    let trimmed = value.trimmingCharacters(in: .whitespaces)

    if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
        check(delay != nil, "delay-seconds \(value.debugDescription) gave nil")
        let expected: Duration = trimmed.utf8.count <= 9 ? .seconds(Int(trimmed)!) : .seconds(999_999_999)
        check(delay == expected, "delay-seconds \(value.debugDescription) gave \(String(describing: delay))")
        check(later == delay, "delay-seconds \(value.debugDescription) depend on the clock")
        return 0
    }
    guard let delay else {
        check(later == nil, "\(value.debugDescription) parses only at one time")
        return 0
    }
    guard let date = HTTPDate.parse(trimmed) else {
        fatalError("\(value.debugDescription) gave a delay of \(delay) but is no HTTP-date")
    }
    let seconds = date.timeIntervalSince1970
    check(seconds.rounded() == seconds && (earliest...latest).contains(seconds),
          "\(value.debugDescription) parsed to \(seconds) s since 1970")
    check(delay >= .zero, "\(value.debugDescription) gave a negative delay \(delay)")
    check(delay == milliseconds(from: now, to: date), "\(value.debugDescription) gave \(delay) to \(seconds) s since 1970")
    check(later == milliseconds(from: now.addingTimeInterval(laterBy), to: date),
          "\(value.debugDescription) gave \(String(describing: later)) an hour later, \(delay) before")
    if seconds >= gregorianFrom, seconds < latest {
        for form in writtenBack(date) {
            let again = HTTPDate.parse(form)?.timeIntervalSince1970
            check(again == seconds, "\(value.debugDescription) parsed to \(seconds) s since 1970, written back as \(form.debugDescription) to \(String(describing: again))")
        }
    }
    return 0
}

/// A fixed clock: 2023-11-14T22:13:20Z.
private let now = Date(timeIntervalSince1970: 1_700_000_000)
private let laterBy: TimeInterval = 3600
/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:60Z (which is 10000-01-01T00:00:00Z).
private let earliest: TimeInterval = -62_135_596_800
private let latest: TimeInterval = 253_402_300_800
/// 1601-01-01T00:00:00Z: Foundation's Gregorian calendar is Julian before October 1582.
private let gregorianFrom: TimeInterval = -11_644_473_600

private func milliseconds(from start: Date, to date: Date) -> Duration {
    .milliseconds(Int64((max(0, date.timeIntervalSince(start)) * 1000).rounded(.up)))
}

private let calendar: Calendar = {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "GMT")!
    return calendar
}()

/// `date` as IMF-fixdate and asctime, and as RFC 850 when its two-digit year reads back as
/// itself: libcurl takes 71 to 99 as 19xx and 00 to 70 as 20xx (so "70" is 2070, not 1970).
private func writtenBack(_ date: Date) -> [String] {
    let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
    let (year, day) = (parts.year!, parts.day!)
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][parts.month! - 1]
    let weekday = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"][parts.weekday! - 1]
    let time = "\(pad(parts.hour!, 2)):\(pad(parts.minute!, 2)):\(pad(parts.second!, 2))"
    var forms = [
        "\(weekday.prefix(3)), \(pad(day, 2)) \(month) \(pad(year, 4)) \(time) GMT",
        "\(weekday.prefix(3)) \(month) \(day < 10 ? " " : "")\(day) \(time) \(year)",
    ]
    if (1971...2070).contains(year) {
        forms.append("\(weekday), \(pad(day, 2))-\(month)-\(pad(year % 100, 2)) \(time) GMT")
    }
    return forms
}

private func pad(_ number: Int, _ width: Int) -> String {
    let digits = String(number)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("RetryAfter: \(message())") }
}
