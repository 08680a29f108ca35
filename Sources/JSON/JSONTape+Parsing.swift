// A tape is parsed by `JSONParser` itself: its readers of strings, numbers and literals, its errors and its
// depth limit, with the structure recorded as entries instead of built as values.

extension JSONParser {
    /// Parses the whole document into `entries`; the error when it is not one JSON document.
    mutating func parseTapeDocument(into entries: inout [JSONTape.Entry]) -> JSONParseError? {
        do {
            skipWhitespace()
            if index == bytes.count { throw error("the document is empty") }
            try parseTapeValue(into: &entries)
            skipWhitespace()
            if index != bytes.count { throw error("unexpected \(describeByte()) after the end of the document") }
            return nil
        } catch let error as JSONParseError {
            return error
        } catch {
            return self.error("\(error)")
        }
    }

    mutating func parseTapeValue(into entries: inout [JSONTape.Entry]) throws(JSONParseError) {
        guard index < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try parseTapeObject(into: &entries)
        case UInt8(ascii: "["): try parseTapeArray(into: &entries)
        case UInt8(ascii: "\""): entries.append(try scanTapeString(kind: .string))
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            entries.append(JSONTape.Entry(kind: .bool, bits: 1))
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            entries.append(JSONTape.Entry(kind: .bool))
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            entries.append(JSONTape.Entry(kind: .null))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try parseNumber() {
            case .int(let integer):
                entries.append(JSONTape.Entry(kind: .int, bits: UInt64(bitPattern: integer)))
            case .double(let double):
                entries.append(JSONTape.Entry(kind: .double, bits: double.bitPattern))
            default: break
            }
        default: throw error("unexpected \(describeByte()), expected a value")
        }
    }

    /// A string's entry: its text's range, plain when it has no escapes. Plain ASCII is scanned here without
    /// making a string; anything else is read by `parseString()`, which checks escapes and UTF-8.
    mutating func scanTapeString(kind: JSONTape.Entry.Kind) throws(JSONParseError) -> JSONTape.Entry {
        let quote = index
        index += 1
        let contentStart = index
        while index < bytes.count {
            if bytes.count - index >= 8 {
                let word = ByteScan.word(bytes, at: index)
                let plain = ByteScan.firstQuoteBackslashOrControl(word)
                if ByteScan.hasNonASCII(word, first: plain) { break }
                index += plain
                if plain == 8 { continue }
            }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let end = index
                index += 1
                return JSONTape.Entry(kind: kind, start: Int32(contentStart), end: Int32(end))
            }
            if byte == UInt8(ascii: "\\") || byte >= 0x80 || byte < 0x20 { break }
            index += 1
        }
        // Escapes, non-ASCII text or an error: the tree's reading checks it (and says what is wrong).
        index = quote
        _ = try parseString()
        var isPlain = true
        for offset in contentStart..<(index - 1) where bytes[offset] == UInt8(ascii: "\\") {
            isPlain = false
            break
        }
        return JSONTape.Entry(kind: kind, isPlain: isPlain, start: Int32(contentStart), end: Int32(index - 1))
    }

    mutating func parseTapeObject(into entries: inout [JSONTape.Entry]) throws(JSONParseError) {
        let object = entries.count
        entries.append(JSONTape.Entry(kind: .object))
        defer { entries[object].end = Int32(entries.count) }
        if try open(closing: UInt8(ascii: "}")) { return }
        var count: UInt32 = 0
        while true {
            let keyStart = try memberNameStart()
            let name = entries.count
            entries.append(try scanTapeString(kind: .name))
            try passColon(afterNameAt: keyStart)
            do { try parseTapeValue(into: &entries) } catch { throw error.inside(member: tapeText(entries[name])) }
            if count > 0, namesBefore(name, in: entries, object: object) {
                let key = tapeText(entries[name])
                var duplicate = error("duplicate member name \"\(key.prefix(100))\"", at: keyStart)
                duplicate.duplicateMemberName = key
                throw duplicate
            }
            count += 1
            entries[object].count = count
            if try passSeparator(closing: UInt8(ascii: "}"), in: "an object") { return }
        }
    }

    /// Whether one of the members the object at entry `object` has so far (those its entry counts) has the
    /// name at entry `name`.
    private func namesBefore(_ name: Int, in entries: [JSONTape.Entry], object: Int) -> Bool {
        entries.withUnsafeBufferPointer { buffer in
            JSONNode(entries: buffer.baseAddress!, bytes: bytes, index: name).withUTF8 { text in
                var found = false
                JSONNode(entries: buffer.baseAddress!, bytes: bytes, index: object).forEachMember { member, _ in
                    found = member.isName(text)
                    return !found
                }
                return found
            } ?? false
        }
    }

    /// The text of a name's entry, for messages.
    private func tapeText(_ entry: JSONTape.Entry) -> String { JSONNode.text(of: entry, in: bytes) }

    mutating func parseTapeArray(into entries: inout [JSONTape.Entry]) throws(JSONParseError) {
        let array = entries.count
        entries.append(JSONTape.Entry(kind: .array))
        defer { entries[array].end = Int32(entries.count) }
        if try open(closing: UInt8(ascii: "]")) { return }
        var count: UInt32 = 0
        while true {
            skipWhitespace()
            do { try parseTapeValue(into: &entries) } catch { throw error.inside(element: Int(count)) }
            count += 1
            entries[array].count = count
            if try passSeparator(closing: UInt8(ascii: "]"), in: "an array") { return }
        }
    }
}
