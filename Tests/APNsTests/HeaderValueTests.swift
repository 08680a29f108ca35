// The small header values of a request (expiration, collapse id, apns-id, environment): how they render,
// parse and refuse bad input.

import APNs
import Foundation
import TestSupport
import Testing

@Suite struct ExpirationTests {
    @Test func rendersTheHeaderValueOrLeavesItOut() {
        #expect(APNsExpiration.none.headerValue == nil)
        #expect(APNsExpiration.immediately.headerValue == "0")
        #expect(APNsExpiration.at(1_764_417_600).headerValue == "1764417600")
    }

    @Test func zeroSecondsIsImmediately() {
        #expect(APNsExpiration(unixSeconds: 0) == .immediately)
        #expect(APNsExpiration(unixSeconds: 1_764_417_600) == .at(1_764_417_600))
        #expect(APNsExpiration.immediately.unixSeconds == 0)
        #expect(APNsExpiration.none.unixSeconds == nil)
    }

    @Test func parsesZeroAndUnixSeconds() throws {
        #expect(try APNsExpiration(parsing: "0") == .immediately)
        #expect(try APNsExpiration(parsing: "1764417600") == .at(1_764_417_600))
    }

    @Test func refusesNegativeTextAndMilliseconds() throws {
        #expect(captured { try APNsExpiration(parsing: "-5") }?.code == .expirationInvalid)
        #expect(captured { try APNsExpiration(parsing: "tomorrow") }?.code == .expirationInvalid)
        let millis = captured { try APNsExpiration(parsing: "1764417600000") }
        #expect(millis?.code == .expirationInvalid)
        #expect(millis?.message.contains("milliseconds; APNs wants UNIX seconds (1764417600)") == true)
        // The last second that is still taken as seconds (year 5138) is accepted.
        #expect(try APNsExpiration(parsing: "99999999999") == .at(99_999_999_999))
    }

    @Test func requestValidationCatchesExpirationsBuiltDirectly() {
        let problems = Sample.request(expiration: .at(-1)).validate()
        #expect(Sample.summary(problems) == ["expirationInvalid@apns-expiration"])
    }
}

@Suite struct CollapseIDTests {
    @Test func acceptsUpTo64BytesCountedInUTF8() throws {
        #expect(try CollapseID(String(repeating: "a", count: 64)).value.utf8.count == 64)
        // 21 CJK characters are 63 bytes; one more ASCII byte makes 64.
        #expect(try CollapseID(String(repeating: "日", count: 21) + "a").value.utf8.count == 64)
        // 16 emoji are 64 bytes.
        #expect(try CollapseID(String(repeating: "😀", count: 16)).value.utf8.count == 64)
    }

    @Test func refuses65BytesEvenWhenFewCharacters() {
        let ascii = captured { try CollapseID(String(repeating: "a", count: 65)) }
        #expect(ascii?.code == .collapseIDTooLong)
        // 22 characters, 66 bytes.
        let cjk = captured { try CollapseID(String(repeating: "日", count: 22)) }
        #expect(cjk?.code == .collapseIDTooLong)
        #expect(cjk?.message.contains("66 bytes of UTF-8; APNs accepts at most 64 (2 over") == true)
        // 16 emoji and one ASCII byte: 17 characters, 65 bytes.
        #expect(captured { try CollapseID(String(repeating: "😀", count: 16) + "a") }?.code == .collapseIDTooLong)
    }

    @Test func refusesEmptyAndControlCharacters() {
        #expect(captured { try CollapseID("") }?.code == .collapseIDEmpty)
        let newline = captured { try CollapseID("evt\r\nx-injected: 1") }
        #expect(newline?.code == .collapseIDInvalidCharacter)
        #expect(newline?.message.contains("0xd") == true)
    }
}

@Suite struct APNsIDTests {
    @Test func randomIDsAreCanonicalLowercaseVersion4UUIDs() {
        for _ in 0..<200 {
            let text = APNsID.random().string
            #expect(text.utf8.count == 36)
            let parts = text.split(separator: "-").map(\.count)
            #expect(parts == [8, 4, 4, 4, 12])
            #expect(text.allSatisfy { "0123456789abcdef-".contains($0) }, "\(text)")
            let characters = Array(text)
            #expect(characters[14] == "4", "version nibble of \(text)")
            #expect("89ab".contains(characters[19]), "variant nibble of \(text)")
        }
    }

    @Test func everyCallGivesAFreshID() {
        let ids = Set((0..<10_000).map { _ in APNsID.random() })
        #expect(ids.count == 10_000)
    }

    @Test func seededGeneratorsRepeatTheirIDs() {
        var first = SeededGenerator(seed: 7)
        var second = SeededGenerator(seed: 7)
        #expect(APNsID.random(using: &first) == APNsID.random(using: &second))
        #expect(APNsID.random(using: &first) != APNsID.random(using: &first))
    }

    @Test func rendersEveryDigitWhereFoundationDoes() throws {
        var generator = SeededGenerator(seed: 18)
        for _ in 0..<2000 {
            let id = APNsID(high: generator.next(), low: generator.next())
            var bytes = [UInt8](repeating: 0, count: 16)
            for index in 0..<8 {
                bytes[index] = UInt8(truncatingIfNeeded: id.high >> UInt64(56 - 8 * index))
                bytes[8 + index] = UInt8(truncatingIfNeeded: id.low >> UInt64(56 - 8 * index))
            }
            let uuid = bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
            #expect(id.string == UUID(uuid: uuid).uuidString.lowercased())
            #expect(try APNsID(parsing: id.string) == id)
        }
    }

    @Test func parsesEitherCaseAndRendersLowercase() throws {
        let upper = try APNsID(parsing: "EC1BF194-B3B2-C1A9-6A4B-B1AE3F7FD2CB")
        #expect(upper.string == "ec1bf194-b3b2-c1a9-6a4b-b1ae3f7fd2cb")
        #expect(try APNsID(parsing: upper.string) == upper)
        #expect(upper.high == 0xEC1B_F194_B3B2_C1A9)
        #expect(upper.low == 0x6A4B_B1AE_3F7F_D2CB)
    }

    @Test(arguments: [
        "", "123e4567e89b42d3a456426614174000", "123e4567-e89b-42d3-a456-42661417400",
        "123e4567-e89b-42d3-a456-4266141740000", "123e4567_e89b-42d3-a456-426614174000",
        "123e4567-e89b-42d3-a456-42661417400g", "{123e4567-e89b-42d3-a456-426614174000}",
        // The characters just outside 0-9, a-f and A-F.
        "123e4567-e89b-42d3-a456-42661417400G", "123e4567-e89b-42d3-a456-42661417400/",
        "123e4567-e89b-42d3-a456-42661417400:", "123e4567-e89b-42d3-a456-42661417400@",
        "123e4567-e89b-42d3-a456-42661417400`", "123e4567-e89b-42d3-a456-42661417400\u{7F}",
    ])
    func refusesAnythingButThe8_4_4_4_12Form(text: String) {
        let error = captured { try APNsID(parsing: text) }
        #expect(error?.code == .apnsIDInvalid)
        #expect(error?.field == "apns-id")
    }
}

@Suite struct EnvironmentTests {
    @Test func hostsAndNames() throws {
        #expect(APNsEnvironment.sandbox.host == "api.sandbox.push.apple.com")
        #expect(APNsEnvironment.production.host == "api.push.apple.com")
        #expect(try APNsEnvironment(parsing: "development") == .sandbox)
        #expect(try APNsEnvironment(parsing: " Sandbox ") == .sandbox)
        #expect(try APNsEnvironment(parsing: "PRODUCTION") == .production)
        #expect(captured { try APNsEnvironment(parsing: "prod") }?.code == .environmentUnknown)
    }
}
