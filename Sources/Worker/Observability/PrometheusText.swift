// The pieces of Prometheus text exposition format 0.0.4 that the registry writes: name rules,
// escaping, and number formatting that Prometheus' Go parser reads back exactly.

enum PrometheusText {
    /// The Content-Type of a 0.0.4 exposition.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    static func isValidMetricName(_ name: String) -> Bool {
        isValidIdentifier(name, allowsColon: true)
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, and names starting `__` are reserved for Prometheus itself.
    static func isValidLabelName(_ name: String) -> Bool {
        isValidIdentifier(name, allowsColon: false) && !name.hasPrefix("__")
    }

    private static func isValidIdentifier(_ name: String, allowsColon: Bool) -> Bool {
        guard let first = name.utf8.first else { return false }
        func isLetter(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || byte == UInt8(ascii: "_") || (allowsColon && byte == UInt8(ascii: ":"))
        }
        guard isLetter(first) else { return false }
        return name.utf8.allSatisfy { isLetter($0) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) }
    }

    /// HELP text escapes backslash and line feed.
    static func appendHelp(_ text: String, into output: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): output.append(contentsOf: #"\n"#.utf8)
            default: output.append(byte)
            }
        }
    }

    /// Label values escape backslash, double quote and line feed.
    static func appendLabelValue(_ text: String, into output: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\n"): output.append(contentsOf: #"\n"#.utf8)
            default: output.append(byte)
            }
        }
    }

    /// `{a="x",b="y"}` from names and values of equal length; nothing when there are none.
    static func labelBlock(names: [String], values: [String], extra: (name: String, value: String)? = nil) -> [UInt8] {
        if names.isEmpty && extra == nil { return [] }
        var output: [UInt8] = [UInt8(ascii: "{")]
        var first = true
        func append(_ name: String, _ value: String) {
            if !first { output.append(UInt8(ascii: ",")) }
            first = false
            output.append(contentsOf: name.utf8)
            output.append(contentsOf: "=\"".utf8)
            appendLabelValue(value, into: &output)
            output.append(UInt8(ascii: "\""))
        }
        for (name, value) in zip(names, values) { append(name, value) }
        if let extra { append(extra.name, extra.value) }
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// Formats a sample value the way Go's `strconv.FormatFloat(v, 'g', -1, 64)` would read it back:
    /// whole numbers without a fraction, `+Inf`, `-Inf`, `NaN`.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value.rounded() == value, abs(value) < 1e15 { return String(Int64(value)) }
        return value.description
    }

    /// One sample line: `name{labels} value\n`.
    static func appendSample(
        name: String, suffix: String = "", labels: [UInt8], value: String, into output: inout [UInt8]
    ) {
        output.append(contentsOf: name.utf8)
        output.append(contentsOf: suffix.utf8)
        output.append(contentsOf: labels)
        output.append(UInt8(ascii: " "))
        output.append(contentsOf: value.utf8)
        output.append(UInt8(ascii: "\n"))
    }
}
