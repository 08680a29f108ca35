// A strict RFC 8259 parser. Events come from other teams' services, so it rejects what a lenient
// parser would guess at (invalid UTF-8, lone surrogates, trailing commas) and says where.

/// Why a JSON document could not be parsed, and where (1-based line and column, 0-based byte offset).
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var offset: Int
    public var line: Int
    public var column: Int
    /// Where in the document the problem is, as a JSON path (`$.devices[0].token`); `$` at the top level.
    /// Filled in as the error leaves each object and array, so finding it costs nothing when parsing succeeds.
    public var path: String = "$"
    /// The member name, when the document is well-formed but names a member twice in one object (and the
    /// options said not to allow that): a caller may count it as invalid content rather than as broken JSON.
    public var duplicateMemberName: String?

    public var description: String { "line \(line), column \(column): \(message)" }
}

/// What a parse accepts beyond RFC 8259's minimum.
public struct JSONParsingOptions: Sendable, Hashable {
    /// Whether an object may name the same member twice. RFC 8259 leaves it to the parser; with `false`
    /// a repeated name is an error (`duplicate member name "x"`) instead of the last value winning, so
    /// that a producer and this parser cannot read one document two ways.
    public var allowsDuplicateKeys: Bool
    public var maximumDepth: Int

    public init(allowsDuplicateKeys: Bool = true, maximumDepth: Int = 128) {
        self.allowsDuplicateKeys = allowsDuplicateKeys
        self.maximumDepth = maximumDepth
    }
}

extension JSONValue {
    /// Parses one JSON document from UTF-8 bytes. Nesting deeper than `maximumDepth` is an error,
    /// so hostile input cannot exhaust the stack.
    public init(parsing bytes: some Collection<UInt8>, maximumDepth: Int = 128) throws(JSONParseError) {
        try self.init(parsing: bytes, options: JSONParsingOptions(maximumDepth: maximumDepth))
    }

    /// Parses one JSON document from UTF-8 bytes with `options` (duplicate member names, nesting depth).
    public init(parsing bytes: some Collection<UInt8>, options: JSONParsingOptions) throws(JSONParseError) {
        let array = Array(bytes)
        var result: Result<JSONValue, JSONParseError> = .failure(
            JSONParseError(message: "empty", offset: 0, line: 1, column: 1))
        array.withUnsafeBufferPointer { buffer in
            withUnsafeTemporaryAllocation(of: JSONObject.Member.self, capacity: JSONParser.pendingCapacity) {
                pending in
                var parser = JSONParser(
                    bytes: buffer, maximumDepth: options.maximumDepth,
                    allowsDuplicateKeys: options.allowsDuplicateKeys, pending: pending.baseAddress!)
                result = parser.parseDocument()
                // Members of objects a failure left unfinished.
                pending.baseAddress!.deinitialize(count: parser.pendingCount)
            }
        }
        self = try result.get()
    }

    /// Parses one JSON document from a string.
    public init(parsing string: String, maximumDepth: Int = 128) throws(JSONParseError) {
        try self.init(parsing: Array(string.utf8), maximumDepth: maximumDepth)
    }
}

struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maximumDepth: Int
    let allowsDuplicateKeys: Bool
    var index = 0
    var depth = 0
    /// The members of the objects being parsed, innermost object's last. An object's members wait here
    /// and move into an array of exactly their number at its `}`: built in place, every object's array
    /// had room for eight members whatever it held, spare room an event kept for as long as it was in
    /// flight (figures: docs/performance.md). An object whose members would overflow this room spills
    /// them into an array of its own.
    let pending: UnsafeMutablePointer<JSONObject.Member>
    var pendingCount = 0
    /// How many members wait at most: room for an event's nested objects at once. The caller's temporary
    /// allocation (2.5 KB) fits on a thread's stack.
    static let pendingCapacity = 64

    init(
        bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int, allowsDuplicateKeys: Bool = true,
        pending: UnsafeMutablePointer<JSONObject.Member>
    ) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        self.allowsDuplicateKeys = allowsDuplicateKeys
        self.pending = pending
    }

    mutating func parseDocument() -> Result<JSONValue, JSONParseError> {
        do {
            skipWhitespace()
            if index == bytes.count { throw error("the document is empty") }
            let value = try parseValue()
            skipWhitespace()
            if index != bytes.count { throw error("unexpected \(describeByte()) after the end of the document") }
            return .success(value)
        } catch let error as JSONParseError {
            return .failure(error)
        } catch {
            return .failure(self.error("\(error)"))
        }
    }

    func error(_ message: String, at offset: Int? = nil) -> JSONParseError {
        let offset = min(offset ?? index, bytes.count)
        var line = 1
        var column = 1
        for i in 0..<offset {
            if bytes[i] == 0x0A {
                line += 1
                column = 1
            } else if bytes[i] & 0xC0 != 0x80 {
                column += 1
            }
        }
        return JSONParseError(message: message, offset: offset, line: line, column: column)
    }

    func describeByte() -> String {
        guard index < bytes.count else { return "end of input" }
        let byte = bytes[index]
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16))"
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected \(describeByte()), expected a value")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = index
        let count = literal.utf8CodeUnitCount
        let matches = literal.withUTF8Buffer { expected -> Bool in
            guard bytes.count - index >= count else { return false }
            for i in 0..<count where bytes[index + i] != expected[i] { return false }
            return true
        }
        guard matches else { throw error("invalid literal, expected '\(literal)'", at: start) }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maximumDepth { throw error("nesting deeper than \(maximumDepth) levels") }
    }

    /// Enters the object or array whose opening bracket is at `index`; true when it is empty (its `closing`
    /// bracket read too, and left). The tree's parse and the tape's share this and `passSeparator`.
    @inline(__always)
    mutating func open(closing: UInt8) throws(JSONParseError) -> Bool {
        try enter()
        index += 1
        skipWhitespace()
        guard index < bytes.count && bytes[index] == closing else { return false }
        index += 1
        depth -= 1
        return true
    }

    /// After a member or element of `container` ("an object", "an array"): false after a `,`, true after
    /// its `closing` bracket (the container left).
    @inline(__always)
    mutating func passSeparator(closing: UInt8, in container: StaticString) throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end of input inside \(container)") }
        if bytes[index] == UInt8(ascii: ",") {
            index += 1
            return false
        }
        guard bytes[index] == closing else {
            throw error(
                "unexpected \(describeByte()), expected ',' or '\(Character(Unicode.Scalar(closing)))' in \(container)")
        }
        index += 1
        depth -= 1
        return true
    }

    /// Where the next member's name starts, after any whitespace; an error when it is not a quoted name.
    @inline(__always)
    mutating func memberNameStart() throws(JSONParseError) -> Int {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
            throw error("unexpected \(describeByte()), expected a member name in double quotes")
        }
        return index
    }

    /// Reads the `:` after the member name whose opening quote is at `nameStart`.
    @inline(__always)
    mutating func passColon(afterNameAt nameStart: Int) throws(JSONParseError) {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
            // The name again, for the message only.
            var name = self
            name.index = nameStart
            let key = (try? name.parseString()) ?? ""
            throw error("unexpected \(describeByte()), expected ':' after member name \"\(key)\"")
        }
        index += 1
        skipWhitespace()
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        if try open(closing: UInt8(ascii: "}")) { return .object(JSONObject()) }
        let start = pendingCount
        // Set once the members outgrow the pending room: they continue here instead.
        var spilled: [JSONObject.Member]?
        while true {
            let keyStart = try memberNameStart()
            let key = try parseString()
            try passColon(afterNameAt: keyStart)
            let value: JSONValue
            do { value = try parseValue() } catch { throw error.inside(member: key) }
            // The object's members so far are either all pending or all spilled.
            let existing =
                spilled == nil
                ? pendingIndex(of: key, from: start) : spilled!.firstIndex { JSONObject.isSameName($0.key, key) }
            if let existing {
                guard allowsDuplicateKeys else {
                    var duplicate = error("duplicate member name \"\(key.prefix(100))\"", at: keyStart)
                    duplicate.duplicateMemberName = key
                    throw duplicate
                }
                // A repeated member name: the last one wins, as in most parsers.
                if spilled != nil { spilled![existing].value = value } else { pending[existing].value = value }
            } else if spilled != nil {
                spilled!.append(JSONObject.Member(key: key, value: value))
            } else if pendingCount == Self.pendingCapacity {
                var members = takePending(from: start)
                members.reserveCapacity(members.count * 2)
                members.append(JSONObject.Member(key: key, value: value))
                spilled = members
            } else {
                (pending + pendingCount).initialize(to: JSONObject.Member(key: key, value: value))
                pendingCount += 1
            }
            if try passSeparator(closing: UInt8(ascii: "}"), in: "an object") {
                return .object(JSONObject(uniqueMembers: spilled ?? takePending(from: start)))
            }
        }
    }

    /// Where `key` is among the pending members from `start` (the current object's), if it is.
    func pendingIndex(of key: String, from start: Int) -> Int? {
        var index = start
        while index < pendingCount {
            if JSONObject.isSameName(pending[index].key, key) { return index }
            index += 1
        }
        return nil
    }

    /// Moves the pending members from `start` into an array of exactly their number.
    ///
    /// Reserved and appended to, not made with `Array(unsafeUninitializedCapacity:)`: that initializer is
    /// not specialized into this module, and the standard library's generic allocation asks the runtime for the
    /// array's metadata on every call (a hash-table lookup, one per parsed object), where the specialized
    /// `reserveCapacity` reads it from a cache (figures: docs/performance.md).
    mutating func takePending(from start: Int) -> [JSONObject.Member] {
        let count = pendingCount - start
        pendingCount = start
        guard count > 0 else { return [] }
        var members: [JSONObject.Member] = []
        members.reserveCapacity(count)
        for offset in 0..<count { members.append((pending + start + offset).move()) }
        return members
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        if try open(closing: UInt8(ascii: "]")) { return .array([]) }
        // Room for a short array at once (an event's devices): growing 1, 2, 4 costs an allocation each.
        var elements: [JSONValue] = []
        elements.reserveCapacity(4)
        while true {
            skipWhitespace()
            do { elements.append(try parseValue()) } catch { throw error.inside(element: elements.count) }
            if try passSeparator(closing: UInt8(ascii: "]"), in: "an array") { return .array(elements) }
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        let start = index
        index += 1
        let contentStart = index
        // Fast path: no escapes, so the bytes are the string once validated as UTF-8 (ASCII needs no
        // validating: it is the common case of ids, tokens and keys).
        var highBits: UInt8 = 0
        while index < bytes.count {
            // Eight bytes at a time: plain ones (no quote, backslash or control character) are skipped, and
            // a word holding the string's end jumps straight to it.
            if bytes.count - index >= 8 {
                let word = ByteScan.word(bytes, at: index)
                let plain = ByteScan.firstQuoteBackslashOrControl(word)
                if ByteScan.hasNonASCII(word, first: plain) { highBits = 0x80 }
                index += plain
                if plain == 8 { continue }
            }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[contentStart..<index])
                let string: String
                if highBits & 0x80 == 0 {
                    string = String(decoding: slice, as: UTF8.self)
                } else {
                    guard let valid = String(validating: slice, as: UTF8.self) else {
                        throw error("invalid UTF-8 in a string", at: start)
                    }
                    string = valid
                }
                index += 1
                return string
            }
            highBits |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("unescaped control character 0x\(String(byte, radix: 16)) in a string") }
            index += 1
        }
        var buffer: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[contentStart..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                guard let string = String(validating: buffer, as: UTF8.self) else {
                    throw error("invalid UTF-8 in a string", at: start)
                }
                index += 1
                return string
            }
            if byte < 0x20 { throw error("unescaped control character 0x\(String(byte, radix: 16)) in a string") }
            if byte != UInt8(ascii: "\\") {
                buffer.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { break }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): buffer.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else { throw error("a high surrogate \\u escape without its low surrogate") }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw error("a high surrogate \\u escape followed by a non-low surrogate")
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw error("a lone low surrogate \\u escape")
                }
                guard let unicodeScalar = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                buffer.append(contentsOf: String(Character(unicodeScalar)).utf8)
            default:
                throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))' in a string", at: index - 2)
            }
        }
        throw error("unterminated string", at: start)
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("a \\u escape needs four hex digits")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("a number needs digits", at: start) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count && isDigit(bytes[index]) {
                throw error("a number cannot have leading zeros", at: start)
            }
        } else {
            while index < bytes.count && isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("a number needs digits after '.'") }
            while index < bytes.count && isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            isInteger = false
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else {
                throw error("a number needs digits in its exponent")
            }
            while index < bytes.count && isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .int(integer) }
        guard let double = Double(text), double.isFinite else { throw error("number out of range", at: start) }
        return .double(double)
    }

    @inline(__always) func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

extension JSONParseError {
    /// The error as seen from the object holding it under `member`: its path gains that step.
    func inside(member: String) -> JSONParseError {
        var copy = self
        copy.path = "$" + JSONPathStep.member(member) + path.dropFirst()
        return copy
    }

    /// The error as seen from the array holding it at `element`.
    func inside(element: Int) -> JSONParseError {
        var copy = self
        copy.path = "$[\(element)]" + path.dropFirst()
        return copy
    }
}

/// Steps of a JSON path as error messages print them: `.name` for a plain name, `["odd name"]` otherwise.
public enum JSONPathStep {
    public static func member(_ name: String) -> String {
        let plain =
            !name.isEmpty && name.utf8.count <= 100
            && name.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-")
            }
        if plain { return "." + name }
        var quoted = "[\""
        for character in name.prefix(100) {
            if character == "\"" || character == "\\" { quoted.append("\\") }
            quoted.append(character)
        }
        return quoted + "\"]"
    }
}
