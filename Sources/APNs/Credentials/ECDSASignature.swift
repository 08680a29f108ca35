// Conversions between the two ECDSA signature encodings: the DER `ECDSA-Sig-Value` OpenSSL signs and
// verifies with, and the raw fixed-width `r || s` that JWS (RFC 7518 §3.4) requires. OpenSSL reads and
// writes the DER; a signature it refuses is walked element by element only to say what is wrong with it.

import COpenSSL

/// ECDSA signature encodings for ES256 (P-256: each of r and s is 32 bytes in raw form).
public enum ECDSASignature {
    /// Converts a DER `SEQUENCE { INTEGER r, INTEGER s }` into raw `r || s`, each left-padded with
    /// zeros to `componentLength` bytes (32 for P-256).
    ///
    /// Accepts the sign-byte `0x00` that DER puts before an integer whose top bit is set, and short
    /// integers (r or s below 2^248). Rejects negative integers, encodings that are not DER (a redundant
    /// leading zero, an indefinite length), trailing bytes, and integers too large for `componentLength`.
    public static func raw(fromDER der: some Collection<UInt8>, componentLength: Int = 32) throws(CredentialError)
        -> [UInt8]
    {
        let bytes = Array(der)
        let (decoded, consumed) = bytes.withUnsafeBufferPointer { buffer -> (OpaquePointer?, Int) in
            guard let start = buffer.baseAddress else { return (nil, 0) }
            var cursor: UnsafePointer<UInt8>? = start
            let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count)
            return (signature, cursor.map { $0 - start } ?? 0)
        }
        guard let signature = decoded else {
            OpenSSLErrorQueue.clear()
            throw diagnosis(of: bytes)
        }
        defer { ECDSA_SIG_free(signature) }
        guard consumed == bytes.count else {
            throw malformed("\(bytes.count - consumed) bytes after the signature SEQUENCE")
        }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var output = [UInt8](repeating: 0, count: 2 * componentLength)
        for (index, (name, component)) in [("r", r), ("s", s)].enumerated() {
            guard let component else { throw malformed("INTEGER \(name) missing") }
            guard BN_is_negative(component) == 0 else { throw malformed("INTEGER \(name) is negative") }
            let size = Int((BN_num_bits(component) + 7) / 8)
            guard size <= componentLength else {
                throw malformed("INTEGER \(name) has \(size) bytes, more than \(componentLength)")
            }
            let written = output.withUnsafeMutableBufferPointer {
                BN_bn2binpad(component, $0.baseAddress! + index * componentLength, Int32(componentLength))
            }
            guard written == Int32(componentLength) else { throw malformed("INTEGER \(name) could not be written") }
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
        guard let signature = ECDSA_SIG_new() else { throw malformed("OpenSSL could not make a signature") }
        defer { ECDSA_SIG_free(signature) }
        let (r, s) = bytes.withUnsafeBufferPointer { buffer in
            (BN_bin2bn(buffer.baseAddress, Int32(half), nil), BN_bin2bn(buffer.baseAddress! + half, Int32(half), nil))
        }
        // set0 takes ownership of both numbers when it succeeds.
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            throw malformed("OpenSSL could not take the signature's r and s")
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { throw malformed("OpenSSL could not encode the signature") }
        var output = [UInt8](repeating: 0, count: Int(length))
        let written = output.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        guard written == length else { throw malformed("OpenSSL could not encode the signature") }
        return output
    }

    /// What is wrong with a signature OpenSSL refused, in the order a reader meets it.
    private static func diagnosis(of bytes: [UInt8]) -> CredentialError {
        do throws(CredentialError) {
            var reader = DERReader(bytes)
            let sequence = try reader.element(tag: 0x30, what: "signature SEQUENCE")
            guard reader.isAtEnd else { return malformed("\(reader.remaining) bytes after the signature SEQUENCE") }
            var inner = DERReader(sequence)
            var integers: [(name: String, contents: [UInt8])] = []
            for name in ["r", "s"] { integers.append((name, try inner.element(tag: 0x02, what: "INTEGER \(name)"))) }
            guard inner.isAtEnd else {
                return malformed("\(inner.remaining) bytes after INTEGER s inside the SEQUENCE")
            }
            for (name, integer) in integers {
                guard let first = integer.first else { return malformed("INTEGER \(name) is empty") }
                guard first & 0x80 == 0 else { return malformed("INTEGER \(name) is negative") }
                if first == 0, integer.count > 1, integer[1] & 0x80 == 0 {
                    return malformed("INTEGER \(name) starts with a redundant zero byte (not DER)")
                }
            }
            return malformed("OpenSSL could not read it")
        } catch {
            return error
        }
    }

    fileprivate static func malformed(_ detail: String) -> CredentialError {
        CredentialError(.malformedSignature, "malformed DER ECDSA signature: \(detail)")
    }
}

/// Reads definite-length DER elements from a byte array, never past its end, through OpenSSL's ASN.1
/// header reader (`ASN1_get_object`). For saying where malformed input goes wrong.
struct DERReader {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position == bytes.count }
    var remaining: Int { bytes.count - position }
    var peekTag: UInt8? { position < bytes.count ? bytes[position] : nil }

    /// Reads one element with the given tag (its whole identifier byte) and returns its contents.
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

    /// Reads any element; returns its identifier byte and contents, or nil at the end of input.
    mutating func anyElement(what: String) throws(CredentialError) -> (tag: UInt8, contents: [UInt8])? {
        guard position < bytes.count else { return nil }
        guard remaining > 1 else { throw ECDSASignature.malformed("\(what) has no length byte") }
        let tag = bytes[position]
        let header = bytes.withUnsafeBufferPointer { buffer -> (flags: Int32, headerLength: Int, length: Int) in
            let start = buffer.baseAddress! + position
            var cursor: UnsafePointer<UInt8>? = start
            var length = 0
            var number: Int32 = 0
            var tagClass: Int32 = 0
            let flags = ASN1_get_object(&cursor, &length, &number, &tagClass, remaining)
            return (flags, cursor.map { $0 - start } ?? 0, length)
        }
        // Bit 0x80: an error, with the header read when only the length is too long for the input;
        // bit 0x01: indefinite length, which DER forbids.
        let headerRead = header.headerLength > 0
        if header.flags & 0x80 != 0 { OpenSSLErrorQueue.clear() }
        guard headerRead, header.flags & 0x01 == 0 else {
            throw ECDSASignature.malformed("\(what) has an invalid length encoding")
        }
        let available = remaining - header.headerLength
        guard header.length >= 0, header.length <= available else {
            throw ECDSASignature.malformed("\(what) claims \(header.length) bytes but only \(available) remain")
        }
        let start = position + header.headerLength
        position = start + header.length
        return (tag, Array(bytes[start..<position]))
    }

    private func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
