// Conversions between the two ECDSA signature encodings: OpenSSL's DER `ECDSA-Sig-Value` and the
// raw fixed-width `r || s` that JWS (RFC 7518 §3.4) requires. Pure functions, no OpenSSL.

/// ECDSA signature encodings for ES256 (P-256: each of r and s is 32 bytes in raw form).
public enum ECDSASignature {
    /// Converts a DER `SEQUENCE { INTEGER r, INTEGER s }` into raw `r || s`, each left-padded with
    /// zeros to `componentLength` bytes (32 for P-256).
    ///
    /// Accepts the sign-byte `0x00` that DER puts before an integer whose top bit is set, and short
    /// integers (r or s below 2^248). Rejects negative integers, trailing bytes, and integers too
    /// large for `componentLength`.
    public static func raw(fromDER der: some Collection<UInt8>, componentLength: Int = 32) throws(CredentialError)
        -> [UInt8]
    {
        var reader = DERReader(Array(der))
        let sequence = try reader.element(tag: 0x30, what: "signature SEQUENCE")
        guard reader.isAtEnd else { throw malformed("\(reader.remaining) bytes after the signature SEQUENCE") }
        var inner = DERReader(sequence)
        let r = try inner.element(tag: 0x02, what: "INTEGER r")
        let s = try inner.element(tag: 0x02, what: "INTEGER s")
        guard inner.isAtEnd else { throw malformed("\(inner.remaining) bytes after INTEGER s inside the SEQUENCE") }
        var output: [UInt8] = []
        output.reserveCapacity(2 * componentLength)
        for (name, integer) in [("r", r), ("s", s)] {
            guard let first = integer.first else { throw malformed("INTEGER \(name) is empty") }
            guard first & 0x80 == 0 else { throw malformed("INTEGER \(name) is negative") }
            let magnitude = integer.drop(while: { $0 == 0 })
            guard magnitude.count <= componentLength else {
                throw malformed("INTEGER \(name) has \(magnitude.count) bytes, more than \(componentLength)")
            }
            output.append(contentsOf: repeatElement(0, count: componentLength - magnitude.count))
            output.append(contentsOf: magnitude)
        }
        return output
    }

    /// Converts raw `r || s` (two equal halves) into minimal DER, as OpenSSL's verify functions want.
    public static func der(fromRaw raw: some Collection<UInt8>) throws(CredentialError) -> [UInt8] {
        let bytes = Array(raw)
        guard !bytes.isEmpty, bytes.count % 2 == 0, bytes.count <= 2 * 66 else {
            throw malformed("a raw signature has two equal halves of at most 66 bytes; got \(bytes.count) bytes")
        }
        let half = bytes.count / 2
        var body: [UInt8] = []
        for component in [bytes[..<half], bytes[half...]] {
            var magnitude = Array(component.drop(while: { $0 == 0 }))
            if magnitude.isEmpty { magnitude = [0] }
            if magnitude[0] & 0x80 != 0 { magnitude.insert(0, at: 0) }
            body.append(0x02)
            body.append(contentsOf: derLength(magnitude.count))
            body.append(contentsOf: magnitude)
        }
        return [0x30] + derLength(body.count) + body
    }

    private static func derLength(_ length: Int) -> [UInt8] {
        length < 0x80 ? [UInt8(length)] : [0x81, UInt8(length)]
    }

    fileprivate static func malformed(_ detail: String) -> CredentialError {
        CredentialError(.malformedSignature, "malformed DER ECDSA signature: \(detail)")
    }
}

/// Reads definite-length DER elements from a byte array, never past its end.
struct DERReader {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position == bytes.count }
    var remaining: Int { bytes.count - position }
    var peekTag: UInt8? { position < bytes.count ? bytes[position] : nil }

    /// Reads one element with the given tag and returns its contents.
    mutating func element(tag: UInt8, what: String) throws(CredentialError) -> [UInt8] {
        guard let actual = peekTag else { throw ECDSASignature.malformed("\(what) missing (input ended)") }
        guard actual == tag else {
            throw ECDSASignature.malformed("\(what): expected tag 0x\(hex(tag)), found 0x\(hex(actual))")
        }
        guard let (_, contents) = try anyElement(what: what) else {
            throw ECDSASignature.malformed("\(what) missing (input ended)")
        }
        return contents
    }

    /// Reads any element; returns its tag and contents, or nil at the end of input.
    mutating func anyElement(what: String) throws(CredentialError) -> (tag: UInt8, contents: [UInt8])? {
        guard position < bytes.count else { return nil }
        let tag = bytes[position]
        position += 1
        guard position < bytes.count else { throw ECDSASignature.malformed("\(what) has no length byte") }
        var length = Int(bytes[position])
        position += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            // Lengths over 4 bytes cannot describe anything we would accept; also rejects indefinite (0x80).
            guard (1...4).contains(count), position + count <= bytes.count else {
                throw ECDSASignature.malformed("\(what) has an invalid length encoding")
            }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[position])
                position += 1
            }
        }
        guard length <= bytes.count - position else {
            throw ECDSASignature.malformed("\(what) claims \(length) bytes but only \(bytes.count - position) remain")
        }
        let contents = Array(bytes[position..<position + length])
        position += length
        return (tag, contents)
    }

    private func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
