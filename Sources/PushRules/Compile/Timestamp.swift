// RFC 3339 timestamps (`2026-11-29T12:00:00Z`, `...12:00:00.250+01:00`) to UNIX seconds, without
// Foundation's formatters, which are slow and locale-sensitive on a hot path.

enum Timestamp {
    /// Whole UNIX seconds (fractions dropped), or nil when `text` is not an RFC 3339 date-time.
    static func unixSeconds(rfc3339 text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parse(Array($0)) }
    }

    private static func parse(_ b: [UInt8]) -> Int64? {
        guard b.count >= 20 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for i in start..<(start + count) {
                guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard let year = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == 0x20,
            let hour = digits(11, 2), b[13] == UInt8(ascii: ":"), let minute = digits(14, 2),
            b[16] == UInt8(ascii: ":"), let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour <= 23,
            minute <= 59, second <= 60
        else { return nil }
        var index = 19
        if index < b.count, b[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < b.count, b[index] >= 0x30, b[index] <= 0x39 { index += 1 }
            guard index > start else { return nil }
        }
        guard index < b.count else { return nil }
        var offset = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let hours = digits(index + 1, 2), index + 3 < b.count, b[index + 3] == UInt8(ascii: ":"),
                let minutes = digits(index + 4, 2), hours <= 23, minutes <= 59
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (b[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        default:
            return nil
        }
        guard index == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59)) - Int64(offset)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's civil-from-days algorithm, inverted).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// `2026-11-29T12:00:00Z` for UNIX seconds; used by the command line's output.
    static func rfc3339(unixSeconds: Int64) -> String {
        let days = Int(unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400)
        let secondsOfDay = Int(unixSeconds - Int64(days) * 86_400)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondsOfDay / 3600, 2)):"
            + "\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2))Z"
    }
}
