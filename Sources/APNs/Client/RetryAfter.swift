// The HTTP Retry-After header: a number of seconds or an HTTP date (IMF-fixdate, RFC 9110 §10.2.3).

import Glibc

enum RetryAfter {
    /// The delay a Retry-After value asks for, measured from `now` (UNIX seconds); nil when the value
    /// is neither a non-negative integer nor an IMF-fixdate such as "Sun, 06 Nov 1994 08:49:37 GMT".
    /// A date in the past means no delay.
    static func delay(_ value: String, now: Int64) -> Duration? {
        let text = value.trimmingSpaces
        if let seconds = Int64(text) {
            return seconds >= 0 ? .seconds(seconds) : nil
        }
        guard let date = parseIMFFixdate(text) else { return nil }
        return .seconds(max(0, date - now))
    }

    /// UNIX seconds of an IMF-fixdate.
    static func parseIMFFixdate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
            let day = Int32(parts[1]), parts[1].count == 2, (1...31).contains(day),
            let month = months.firstIndex(of: String(parts[2])),
            let year = Int32(parts[3]), parts[3].count == 4
        else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = Int32(clock[0]), let minute = Int32(clock[1]), let second = Int32(clock[2]),
            hour < 24, minute < 60, second < 61
        else { return nil }
        var broken = tm()
        broken.tm_year = year - 1900
        broken.tm_mon = Int32(month)
        broken.tm_mday = day
        broken.tm_hour = hour
        broken.tm_min = minute
        broken.tm_sec = second
        return Int64(timegm(&broken))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}

extension String {
    fileprivate var trimmingSpaces: String {
        var scalars = Substring(self)
        while scalars.first == " " || scalars.first == "\t" { scalars.removeFirst() }
        while scalars.last == " " || scalars.last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
