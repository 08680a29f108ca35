// Device tokens: the lengths APNs issues, and errors that say what is wrong with a bad one.

import APNs
import Testing

@Suite struct DeviceTokenTests {
    @Test(arguments: [
        ("0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9", "canonical"),
        ("0A1B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F60718293A4B5C6D7E8F9", "upper case"),
        ("<0a1b2c3d 4e5f6071 8293a4b5 c6d7e8f9 0a1b2c3d 4e5f6071 8293a4b5 c6d7e8f9>", "NSData description"),
        ("  0a1b2c3d4e5f60718293a4b5c6d7e8f9\n0a1b2c3d4e5f60718293a4b5c6d7e8f9\r\n", "wrapped with CRLF"),
        ("\t0a1b2c3d4e5f6071\t8293a4b5c6d7e8f9 0A1B2C3D4E5F6071 8293A4B5C6D7E8F9\t", "tabs and mixed case"),
        ("0a1b2c3d4e5f6071\u{00A0}8293a4b5c6d7e8f90a1b2c3d\u{200B}4e5f60718293a4b5c6d7e8f9\u{FEFF}", "invisible"),
    ])
    func normalisesPastedTokensToLowercaseHex(raw: String, shape: String) throws {
        let token = try DeviceToken(raw)
        #expect(token.hex == Sample.tokenHex, "\(shape)")
        #expect(token.byteCount == 32)
    }

    @Test func acceptsTheDocumentedRangeOfLengths() throws {
        #expect(try DeviceToken(String(repeating: "ab", count: 32)).byteCount == 32)
        #expect(try DeviceToken(String(repeating: "ab", count: 100)).byteCount == 100)
        #expect(DeviceToken.byteCountRange == 32...100)
    }

    @Test func refusesAnEmptyToken() {
        for raw in ["", "   ", "<>", "< \n >"] {
            #expect(captured { try DeviceToken(raw) }?.code == .deviceTokenEmpty, "\(raw)")
        }
    }

    @Test func refusesAnOddNumberOfDigitsSayingHowMany() {
        let error = captured { try DeviceToken(String(Sample.tokenHex.dropLast())) }
        #expect(error?.code == .deviceTokenOddLength)
        #expect(error?.field == "device-token")
        #expect(error?.message.contains("63 hex digits") == true)
    }

    @Test func refusesANonHexCharacterNamingItAndItsPosition() {
        var raw = Array(Sample.tokenHex)
        raw[16] = "g"
        let error = captured { try DeviceToken(String(raw)) }
        #expect(error?.code == .deviceTokenNotHex)
        #expect(error?.message.contains("'g' at position 17") == true)
    }

    @Test func positionCountsWhatTheUserTypedIncludingSpacesAndBrackets() {
        let error = captured { try DeviceToken("<0a1b 2c3z>") }
        #expect(error?.message.contains("'z' at position 10") == true)
    }

    @Test func namesInvisibleCharactersByCodePoint() {
        let error = captured { try DeviceToken("0a1b\u{07}2c") }
        #expect(error?.message.contains("U+0007 at position 5") == true)
        let dash = captured { try DeviceToken("0a1b-2c") }
        #expect(dash?.message.contains("'-' at position 5") == true)
        let accented = captured { try DeviceToken("0a1bé2c") }
        #expect(accented?.message.contains("'é' (U+00E9) at position 5") == true)
    }

    @Test func refusesTruncatedAndOverlongTokensWithTheirLength() {
        let short = captured { try DeviceToken(String(repeating: "ab", count: 31)) }
        #expect(short?.code == .deviceTokenTooShort)
        #expect(short?.message.contains("62 hex digits (31 bytes)") == true)
        let long = captured { try DeviceToken(String(repeating: "ab", count: 101)) }
        #expect(long?.code == .deviceTokenTooLong)
        #expect(long?.message.contains("202 hex digits (101 bytes)") == true)
    }

    @Test func convertsToAndFromBytes() throws {
        let token = try DeviceToken(Sample.tokenHex)
        #expect(token.bytes.prefix(4) == [0x0a, 0x1b, 0x2c, 0x3d])
        #expect(try DeviceToken(bytes: token.bytes) == token)
        #expect(throws: APNsRequestError.self) { try DeviceToken(bytes: [UInt8](repeating: 1, count: 16)) }
    }

    @Test func equalTokensFromDifferentShapesAreEqual() throws {
        #expect(try DeviceToken(Sample.tokenHex.uppercased()) == DeviceToken("<" + Sample.tokenHex + ">"))
    }
}
