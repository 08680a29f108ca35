// RFC 3339 timestamps both ways, for events, records and rules; no Foundation formatters on hot paths.

/// RFC 3339 timestamps without Foundation's formatters, which are slow and locale-sensitive.
public enum RFC3339 {
    /// Parses `2026-11-29T12:00:00Z`, with optional fraction and `+hh:mm` offset, to UNIX seconds.
    public static func parse(_ text: String) -> Double? {
        // Read in place: a copy into an array cost an allocation for every event's `occurred_at`.
        text.withUTF8Bytes { parse(utf8: $0) }
    }

    /// `parse(_:)` for the text's UTF-8 bytes (a string's where it lies in a `JSONTape`).
    public static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for _ in 0..<digits {
                let byte = bytes[index]
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
                index += 1
            }
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
            expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
            let second = number(2)
        else { return nil }
        guard (1...12).contains(month), (1...daysInMonth(year, month)).contains(day), hour < 24, minute < 60,
            second <= 60
        else { return nil }
        var fraction = 0.0
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 48 && bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offsetSeconds = 0
        if expect("Zz") {
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHours = number(2), expect(":"), let offsetMinutes = number(2), offsetHours < 24,
                offsetMinutes < 60
            else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = daysFromCivil(year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Double(seconds) + fraction
    }

    /// Formats whole UNIX seconds as `2026-11-29T12:00:00Z` (UTC).
    public static func format(wholeSeconds: Int64) -> String {
        let text = format(Double(wholeSeconds))
        return String(text.dropLast(5)) + "Z"
    }

    /// Formats UNIX seconds as `2026-11-29T12:00:00.123Z` (UTC, milliseconds).
    public static func format(_ seconds: Double) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        append(seconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `format(seconds)`'s UTF-8 to `output` (for writers of JSON records: no String made).
    public static func append(_ seconds: Double, to output: inout [UInt8]) {
        withText(seconds) { output.append(contentsOf: $0) }
    }

    /// Calls `body` with `format(seconds)`'s UTF-8, made in a buffer on the stack.
    public static func withText(_ seconds: Double, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        let totalMilliseconds = Int64((seconds * 1000).rounded(.down))
        var days = totalMilliseconds / 86_400_000
        var millisecondOfDay = totalMilliseconds % 86_400_000
        if millisecondOfDay < 0 {
            millisecondOfDay += 86_400_000
            days -= 1
        }
        let (year, month, day) = civilFromDays(Int(days))
        let hour = Int(millisecondOfDay / 3_600_000)
        let minute = Int(millisecondOfDay / 60_000 % 60)
        let second = Int(millisecondOfDay / 1000 % 60)
        let millisecond = Int(millisecondOfDay % 1000)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: fixedWidthLength) { text in
            // Outside four digits the year is written in full, as `String(year)` would (never for real timestamps).
            guard year >= 0 && year <= 9999 else {
                writeFixedWidth(0, month, day, hour, minute, second, millisecond, into: text)
                let whole = Array(String(year).utf8) + text[4...]
                whole.withUnsafeBufferPointer(body)
                return
            }
            writeFixedWidth(year, month, day, hour, minute, second, millisecond, into: text)
            body(UnsafeBufferPointer(text))
        }
    }

    private static let fixedWidthLength = 24

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, written into one fixed buffer and appended at once: a timestamp is in
    /// every outcome, and appending it byte by byte cost an array capacity check per byte.
    private static func writeFixedWidth(
        _ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int, _ millisecond: Int,
        into text: UnsafeMutableBufferPointer<UInt8>
    ) {
        precondition(text.count >= fixedWidthLength)
        var position = 0
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                text[position] = UInt8(ascii: "0") + UInt8(value / divisor % 10)
                position += 1
                divisor /= 10
            }
        }
        func part(_ separator: Unicode.Scalar, _ value: Int, _ width: Int) {
            text[position] = UInt8(ascii: separator)
            position += 1
            digits(value, width)
        }
        digits(year, 4)
        part("-", month, 2)
        part("-", day, 2)
        part("T", hour, 2)
        part(":", minute, 2)
        part(":", second, 2)
        part(".", millisecond, 3)
        text[position] = UInt8(ascii: "Z")
    }

    static func daysInMonth(_ year: Int, _ month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days-from-civil algorithm (public domain description).
    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
