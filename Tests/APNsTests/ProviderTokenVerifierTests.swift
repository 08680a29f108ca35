// The verifier the APNs simulator uses: accepts good ES256 tokens, and names each way a token is bad.

import Foundation
import TestSupport
import Testing

@testable import APNs

@Suite struct ProviderTokenVerifierTests {
    let key: ProviderTokenKey
    let verifier: ProviderTokenVerifier

    init() throws {
        key = try ProviderTokenKey.generate(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        verifier = try ProviderTokenVerifier(publicKeysByKeyID: [key.keyID: key.publicKeyPEM])
    }

    /// A token with arbitrary header and claims, signed by `key` (raw r||s unless `der`).
    func forge(header: String, claims: String, signer: ProviderTokenKey? = nil, der: Bool = false) throws -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signing = try (signer ?? key).key.signSHA256(Array(input.utf8))
        let signature = der ? signing : try ECDSASignature.raw(fromDER: signing)
        return input + "." + Base64URL.encode(signature)
    }

    func expectRejection(
        _ token: String, _ expected: ProviderTokenVerificationError,
        by other: ProviderTokenVerifier? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(throws: expected, sourceLocation: sourceLocation) { try (other ?? verifier).verify(token) }
    }

    @Test func acceptsAGoodTokenAndReturnsItsClaims() throws {
        let token = try key.makeToken(issuedAt: 1_764_000_000)
        #expect(
            try verifier.verify(token.jwt)
                == VerifiedProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: 1_764_000_000))
        #expect(verifier.keyIDs == ["ABC123DEFG"])
    }

    @Test func acceptsATokenSignedByTheOpenSSLCommandLineTool() throws {
        let fixtures = SigningKeyFixtures.shared
        let pem = String(decoding: fixtures.directory.read("AuthKey.pub.pem"), as: UTF8.self)
        let verifier = try ProviderTokenVerifier(publicKeysByKeyID: ["KEY0000001": pem])
        let input =
            Base64URL.encode(Array(#"{"alg":"ES256","kid":"KEY0000001"}"#.utf8)) + "."
            + Base64URL.encode(Array(#"{"iss":"TEAM000001","iat":1700000000}"#.utf8))
        let directory = TemporaryDirectory(prefix: "apns-cred")
        directory.write("input", input)
        let der = try OpenSSLTool.run(["dgst", "-sha256", "-sign", fixtures.p256, "input"], in: directory.path)
        let token = input + "." + Base64URL.encode(try ECDSASignature.raw(fromDER: der))
        #expect(
            try verifier.verify(token)
                == VerifiedProviderToken(
                    keyID: "KEY0000001", teamID: "TEAM000001",
                    issuedAt: 1_700_000_000))
        // OpenSSL's own DER output, put in the token unconverted, is the classic bug and must be refused.
        expectRejection(input + "." + Base64URL.encode(der), .derEncodedSignature, by: verifier)
    }

    @Test func refusesADEREncodedSignature() throws {
        let token = try forge(
            header: #"{"alg":"ES256","kid":"ABC123DEFG"}"#, claims: #"{"iss":"T","iat":1}"#,
            der: true)
        expectRejection(token, .derEncodedSignature)
    }

    @Test func refusesAnUnknownKeyID() throws {
        let token = try forge(header: #"{"alg":"ES256","kid":"ZZZ999ZZZ9"}"#, claims: #"{"iss":"T","iat":1}"#)
        expectRejection(token, .unknownKeyID("ZZZ999ZZZ9"))
    }

    @Test func refusesASignatureByAnotherKeyUnderTheSameKeyID() throws {
        let impostor = try ProviderTokenKey.generate(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        expectRejection(try impostor.makeToken(issuedAt: 1).jwt, .badSignature)
    }

    @Test func refusesChangedClaims() throws {
        let parts = try key.makeToken(issuedAt: 1_764_000_000).jwt.split(separator: ".")
        let otherClaims = Base64URL.encode(Array(#"{"iss":"DEF123GHIJ","iat":1764009999}"#.utf8))
        expectRejection("\(parts[0]).\(otherClaims).\(parts[2])", .badSignature)
    }

    @Test func refusesAFlippedSignatureBit() throws {
        let parts = try key.makeToken(issuedAt: 5).jwt.split(separator: ".")
        var signature = try #require(Base64URL.decode(parts[2]))
        signature[40] ^= 0x01
        expectRejection("\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))", .badSignature)
    }

    @Test func refusesOtherAlgorithms() throws {
        let token = try forge(header: #"{"alg":"HS256","kid":"ABC123DEFG"}"#, claims: #"{"iss":"T","iat":1}"#)
        expectRejection(token, .unsupportedAlgorithm("HS256"))
        let none = try forge(header: #"{"alg":"none","kid":"ABC123DEFG"}"#, claims: #"{"iss":"T","iat":1}"#)
        expectRejection(none, .unsupportedAlgorithm("none"))
    }

    @Test(arguments: [
        (#"{"kid":"ABC123DEFG"}"#, #"{"iss":"T","iat":1}"#, "alg"),
        (#"{"alg":"ES256"}"#, #"{"iss":"T","iat":1}"#, "kid"),
        (#"{"alg":"ES256","kid":"ABC123DEFG"}"#, #"{"iat":1}"#, "iss"),
        (#"{"alg":"ES256","kid":"ABC123DEFG"}"#, #"{"iss":"T"}"#, "iat"),
        (#"{"alg":"ES256","kid":"ABC123DEFG"}"#, #"{"iss":"T","iat":"1"}"#, "iat"),
    ])
    func refusesMissingFields(header: String, claims: String, field: String) throws {
        expectRejection(try forge(header: header, claims: claims), .missingField(field))
    }

    @Test func refusesMalformedTokens() throws {
        let good = try key.makeToken(issuedAt: 1).jwt
        let parts = good.split(separator: ".")
        let cases: [(String, String)] = [
            ("", "3 base64url parts"),
            ("\(parts[0]).\(parts[1])", "3 base64url parts"),
            (good + ".x", "this has 4"),
            ("\(parts[0])=.\(parts[1]).\(parts[2])", "header is not base64url"),
            ("\(parts[0]).\(parts[1]).\(parts[2])+", "signature is not base64url"),
            ("\(Base64URL.encode(Array("[1]".utf8))).\(parts[1]).\(parts[2])", "header is not a JSON object"),
            ("\(parts[0]).\(Base64URL.encode(Array("{".utf8))).\(parts[2])", "claims are not a JSON object"),
            (String(repeating: "a", count: 5000), "over 4096"),
        ]
        for (token, fragment) in cases {
            #expect {
                try verifier.verify(token)
            } throws: { error in
                guard case .malformed(let detail) = error as? ProviderTokenVerificationError else { return false }
                return detail.contains(fragment)
            }
        }
    }

    @Test func refusesASignatureOfTheWrongLength() throws {
        let parts = try key.makeToken(issuedAt: 1).jwt.split(separator: ".")
        let short = Base64URL.encode([UInt8](repeating: 7, count: 48))
        expectRejection("\(parts[0]).\(parts[1]).\(short)", .invalidSignatureLength(48))
    }

    @Test func rejectsPublicKeysThatAreNotP256() throws {
        let fixtures = SigningKeyFixtures.shared
        let directory = TemporaryDirectory(prefix: "apns-cred")
        try OpenSSLTool.run(["pkey", "-in", fixtures.p384, "-pubout", "-out", "p384.pub"], in: directory.path)
        let p384 = String(decoding: directory.read("p384.pub"), as: UTF8.self)
        #expect {
            _ = try ProviderTokenVerifier(publicKeysByKeyID: ["ABC123DEFG": p384])
        } throws: { error in
            (error as? CredentialError)?.code == .unsupportedKeyType && "\(error)".contains("secp384r1")
        }
        #expect {
            _ = try ProviderTokenVerifier(publicKeysByKeyID: ["ABC123DEFG": "not a key"])
        } throws: { error in
            (error as? CredentialError)?.code == .invalidPublicKey && "\(error)".contains("ABC123DEFG")
        }
    }
}
