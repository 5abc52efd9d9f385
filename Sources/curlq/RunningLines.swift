import Foundation

/// The `progress` lines of the `lines` display: one per file being transferred, with its
/// bytes, speed and time left, e.g.
/// `progress big.iso  12.0 MiB / 100 MiB (12%), 2.40 MiB/s, ETA 37s`.
enum RunningLines {
    static func text(_ model: BatchModel, now: Double) -> String {
        let running = model.active.sorted { model.live[$0].startSequence < model.live[$1].startSequence }
        var text = ""
        for index in running {
            let live = model.live[index]
            guard live.phase == .running else { continue }  // retry waits and checks have lines of their own
            text += "progress \(Format.safe(model.jobs[index].name))  \(detail(live, now: now))\n"
        }
        return text
    }

    static func detail(_ live: BatchModel.Live, now: Double) -> String {
        let speed = live.meter.bytesPerSecond(at: now)
        var parts: [String] = []
        if let total = live.total, total > 0 {
            let percent = Int(min(1, max(0, Double(live.bytes) / Double(total))) * 100)
            parts.append("\(Format.bytes(live.bytes)) / \(Format.bytes(total)) (\(percent)%)")
        } else {
            parts.append(Format.bytes(live.bytes))
        }
        parts.append(Format.speed(speed))
        if let total = live.total, total > 0, let speed, speed > 0 {
            parts.append("ETA " + Format.duration(Double(max(0, total - live.bytes)) / speed))
        }
        return parts.joined(separator: ", ")
    }
}
