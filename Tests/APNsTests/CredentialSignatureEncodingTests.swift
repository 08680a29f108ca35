// DER <-> raw ECDSA signature conversion and base64url, tested with crafted inputs.

import TestSupport
import Testing

@testable import APNs

@Suite struct CredentialSignatureEncodingTests {
    /// DER INTEGER / SEQUENCE building for crafted inputs.
    static func integer(_ bytes: [UInt8]) -> [UInt8] { [0x02, UInt8(bytes.count)] + bytes }
    static func sequence(_ body: [UInt8]) -> [UInt8] { [0x30, UInt8(body.count)] + body }

    static let r32: [UInt8] = (1...32).map { UInt8($0) }  // top bit clear: no sign byte
    static let s32: [UInt8] = (1...32).map { UInt8(0xA0 + $0 % 16) }  // top bit set: DER adds 0x00

    @Test func convertsFullLengthComponentsAndDropsTheSignByte() throws {
        let der = Self.sequence(Self.integer(Self.r32) + Self.integer([0x00] + Self.s32))
        #expect(der[2 + 2 + 32 + 1] == 33)  // s really carries the 0x00 sign byte
        let raw = try ECDSASignature.raw(fromDER: der)
        #expect(raw == Self.r32 + Self.s32)
    }

    @Test func leftPadsShortComponents() throws {
        let shortR: [UInt8] = Array(Self.r32.dropFirst(1))  // 31 bytes: r < 2^248
        let shortS: [UInt8] = [0x05]  // 1 byte
        let raw = try ECDSASignature.raw(fromDER: Self.sequence(Self.integer(shortR) + Self.integer(shortS)))
        #expect(raw.count == 64)
        #expect(raw == [0] + shortR + [UInt8](repeating: 0, count: 31) + [0x05])
    }

    @Test func handlesAShortComponentThatNeedsASignByte() throws {
        // r = 0x00 0x80 ...: 31 significant bytes whose top bit is set, so DER writes 32 bytes with 0x00.
        let significant: [UInt8] = [0x80] + [UInt8](repeating: 0x11, count: 30)
        let der = Self.sequence(Self.integer([0x00] + significant) + Self.integer(Self.r32))
        let raw = try ECDSASignature.raw(fromDER: der)
        #expect(Array(raw[0..<32]) == [0x00] + significant)
        #expect(Array(raw[32...]) == Self.r32)
    }

    @Test func roundTripsThroughMinimalDER() throws {
        var generator = SeededGenerator.replayable("roundTripsThroughMinimalDER")
        let shapes: [[UInt8]] = [
            [UInt8](repeating: 0, count: 3) + (0..<29).map { _ in UInt8.random(in: 0...255, using: &generator) },
            [0xFF] + (0..<31).map { _ in UInt8.random(in: 0...255, using: &generator) },
            [0x00, 0x80] + [UInt8](repeating: 0, count: 30),
            [UInt8](repeating: 0, count: 31) + [1],
        ]
        for r in shapes {
            for s in shapes {
                let der = try ECDSASignature.der(fromRaw: r + s)
                #expect(try ECDSASignature.raw(fromDER: der) == r + s)
                // Minimal: no INTEGER starts with 0x00 unless the next byte has its top bit set.
                var reader = DERReader(Array(der.dropFirst(2)))
                for _ in 0..<2 {
                    let contents = try reader.element(tag: 0x02, what: "INTEGER")
                    if contents.count > 1, contents[0] == 0 { #expect(contents[1] & 0x80 != 0) }
                    #expect(contents[0] & 0x80 == 0)
                }
            }
        }
    }

    @Test(
        arguments: [
            ("trailing byte", sequence(integer([1]) + integer([2])) + [0x00], "after the signature SEQUENCE"),
            ("not a SEQUENCE", [0x31, 0x06] + integer([1]) + integer([2]), "expected tag 0x30"),
            ("length beyond the end", [0x30, 0x40] + integer([1]) + integer([2]), "claims 64 bytes"),
            ("negative r", sequence(integer([0x80]) + integer([2])), "INTEGER r is negative"),
            ("r too long", sequence(integer([0x01] + [UInt8](repeating: 7, count: 32)) + integer([2])), "33 bytes"),
            ("missing s", sequence(integer([1])), "INTEGER s missing"),
            ("empty r", sequence([0x02, 0x00] + integer([2])), "INTEGER r is empty"),
            ("extra INTEGER", sequence(integer([1]) + integer([2]) + integer([3])), "after INTEGER s"),
            ("indefinite length", [0x30, 0x80] + integer([1]) + integer([2]), "invalid length encoding"),
            ("empty input", [], "missing"),
        ] as [(String, [UInt8], String)])
    func rejectsMalformedDER(name: String, der: [UInt8], expected: String) {
        #expect {
            try ECDSASignature.raw(fromDER: der)
        } throws: { error in
            guard let error = error as? CredentialError else { return false }
            return error.code == .malformedSignature && error.message.contains(expected)
        }
    }

    @Test func rejectsARawSignatureOfOddLength() {
        #expect(throws: CredentialError.self) { try ECDSASignature.der(fromRaw: [UInt8](repeating: 1, count: 63)) }
        #expect(throws: CredentialError.self) { try ECDSASignature.der(fromRaw: []) }
    }

    @Test func base64URLMatchesRFC4648VectorsWithoutPadding() {
        let vectors = [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        // 0xFB 0xFF encodes to "+/8" in base64; base64url uses '-' and '_'.
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test(arguments: ["Zg==", "Zm9v+", "Zm9v/", "Z", "Zh", "Zm9v Yg", "Zm\u{e9}"])
    func base64URLRejectsPaddingForeignCharactersAndNonCanonicalInput(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func base64URLRoundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }
}
