// Loading .p8 keys (each way it goes wrong has its own error), token structure, and signatures that
// an independent verifier (the openssl command-line tool) accepts.

import Foundation
import TestSupport
import Testing

@testable import APNs

@Suite struct ProviderTokenKeyTests {
    let fixtures = SigningKeyFixtures.shared
    static let keyID = "ABC123DEFG"
    static let teamID = "DEF123GHIJ"

    func load(_ path: String, keyID: String = keyID, teamID: String = teamID, password: String? = nil) throws
        -> ProviderTokenKey
    {
        try ProviderTokenKey(contentsOfFile: path, keyID: keyID, teamID: teamID, password: password)
    }

    func expectError(
        _ code: CredentialError.Code, containing fragments: [String],
        sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
    ) {
        do {
            try body()
            Issue.record("expected \(code), but it loaded", sourceLocation: sourceLocation)
        } catch let error as CredentialError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            for fragment in fragments {
                #expect(
                    error.message.contains(fragment), "'\(error.message)' lacks '\(fragment)'",
                    sourceLocation: sourceLocation)
            }
            #expect(!error.message.contains(fixtures.privateKeyBody.prefix(24)), sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func tokenHasTheAPNsHeaderAndClaimsExactly() throws {
        let key = try load(fixtures.p256)
        let token = try key.makeToken(issuedAt: 1_764_000_000)
        let parts = token.jwt.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.jwt.contains("="))
        #expect(
            Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) }
                == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(
            Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) }
                == #"{"iss":"DEF123GHIJ","iat":1764000000}"#)
        #expect(Base64URL.decode(parts[2])?.count == 64)
        #expect(token.issuedAt == 1_764_000_000 && token.keyID == Self.keyID && token.teamID == Self.teamID)
        #expect(token.authorizationHeaderValue == "bearer " + token.jwt)
    }

    @Test func signatureVerifiesWithTheOpenSSLCommandLineTool() throws {
        let key = try load(fixtures.p256)
        let token = try key.makeToken(issuedAt: 1_764_000_123)
        let parts = token.jwt.split(separator: ".")
        let signingInput = Array("\(parts[0]).\(parts[1])".utf8)
        let raw = try #require(Base64URL.decode(parts[2]))
        let directory = TemporaryDirectory(prefix: "apns-cred")
        directory.write("input", signingInput)
        directory.write("signature.der", try ECDSASignature.der(fromRaw: raw))
        let output = try OpenSSLTool.run(
            [
                "dgst", "-sha256", "-verify", fixtures.p256PublicKey,
                "-signature", "signature.der", "input",
            ], in: directory.path)
        #expect(String(decoding: output, as: UTF8.self).contains("Verified OK"))

        // The same check must fail for a changed message, or it proves nothing.
        directory.write("input", Array("\(parts[0]).eyJpc3MiOiJYIn0".utf8))
        #expect(throws: TestFailure.self) {
            try OpenSSLTool.run(
                [
                    "dgst", "-sha256", "-verify", fixtures.p256PublicKey,
                    "-signature", "signature.der", "input",
                ], in: directory.path)
        }
    }

    @Test func everySignatureIsFreshAndVerifies() throws {
        let key = try load(fixtures.p256)
        let verifier = try ProviderTokenVerifier(
            publicKeysByKeyID: [
                Self.keyID: String(
                    decoding: fixtures.directory.read("AuthKey.pub.pem"),
                    as: UTF8.self)
            ])
        var signatures: Set<String> = []
        for _ in 0..<20 {
            let token = try key.makeToken(issuedAt: 1_764_000_000)
            signatures.insert(String(token.jwt.split(separator: ".")[2]))
            #expect(try verifier.verify(token.jwt).issuedAt == 1_764_000_000)
        }
        #expect(signatures.count == 20)  // ECDSA is randomized: a constant signature would mean a broken signer
    }

    @Test func loadsSEC1AndEncryptedKeysWithTheirPassword() throws {
        let reference = try load(fixtures.p256).publicKeyPEM
        #expect(try load(fixtures.p256SEC1).publicKeyPEM == reference)
        #expect(try load(fixtures.p256Encrypted, password: SigningKeyFixtures.password).publicKeyPEM == reference)
        #expect(try load(fixtures.p256EncryptedSEC1, password: SigningKeyFixtures.password).publicKeyPEM == reference)
    }

    @Test func missingFileSaysNotFoundAndWhere() {
        expectError(.fileNotFound, containing: ["not found", "/nonexistent/AuthKey_X.p8"]) {
            _ = try load("/nonexistent/AuthKey_X.p8")
        }
    }

    @Test func directoryIsNotAKeyFile() {
        expectError(.fileUnreadable, containing: ["not a regular file"]) { _ = try load(fixtures.directory.path) }
    }

    @Test func derKeySaysConvertToPEM() {
        expectError(.notPEM, containing: ["binary DER", "openssl pkey -inform DER"]) { _ = try load(fixtures.p256DER) }
    }

    @Test func randomTextSaysNotPEMWithoutEchoingTheFile() {
        expectError(.notPEM, containing: ["is not PEM", "BEGIN PRIVATE KEY"]) {
            _ = try load(fixtures.randomText)
        }
        do {
            _ = try load(fixtures.randomText)
        } catch {
            #expect(!"\(error)".contains("vault"))
        }
    }

    @Test func emptyFileSaysEmpty() {
        let directory = TemporaryDirectory(prefix: "apns-cred")
        expectError(.notPEM, containing: ["is empty"]) { _ = try load(directory.write("empty.p8", "")) }
    }

    @Test func publicKeyOrCertificateInsteadOfPrivateKeySaysWhatItHolds() {
        expectError(.missingPrivateKey, containing: ["PUBLIC KEY", "no private key"]) {
            _ = try load(fixtures.publicKeyOnly)
        }
    }

    @Test func rsaKeyIsRejectedAsNotP256() {
        expectError(.unsupportedKeyType, containing: ["RSA key (1024 bits)", "EC P-256"]) { _ = try load(fixtures.rsa) }
    }

    @Test func p384KeyIsRejectedAsNotP256() {
        expectError(.unsupportedKeyType, containing: ["secp384r1", "EC P-256"]) { _ = try load(fixtures.p384) }
    }

    @Test func encryptedKeyWithoutPasswordAsksForOne() {
        expectError(.passwordRequired, containing: ["encrypted", "no password"]) {
            _ = try load(fixtures.p256Encrypted)
        }
        expectError(.passwordRequired, containing: ["encrypted"]) { _ = try load(fixtures.p256EncryptedSEC1) }
    }

    @Test func encryptedKeyWithWrongPasswordSaysSo() {
        expectError(.wrongPassword, containing: ["password is wrong"]) {
            _ = try load(fixtures.p256Encrypted, password: "battery staple")
        }
        expectError(.wrongPassword, containing: ["password is wrong"]) {
            _ = try load(fixtures.p256EncryptedSEC1, password: "battery staple")
        }
    }

    @Test(arguments: ["abc123defg", "ABC123DEF", "ABC123DEFGH", "ABC-23DEFG", "", "ABC123DEFÉ"])
    func badKeyIDIsRejectedWithTheRule(keyID: String) {
        expectError(.invalidKeyID, containing: ["Key ID", "exactly 10 characters", "Keys"]) {
            _ = try load(fixtures.p256, keyID: keyID)
        }
    }

    @Test(arguments: ["def123ghij", "DEF123GHI", " DEF123GHIJ"])
    func badTeamIDIsRejectedWithTheRule(teamID: String) {
        expectError(.invalidTeamID, containing: ["Team ID", "exactly 10 characters", "Membership"]) {
            _ = try load(fixtures.p256, teamID: teamID)
        }
    }

    @Test func descriptionsNeverShowKeyMaterialOrTheToken() throws {
        let key = try load(fixtures.p256)
        let token = try key.makeToken(issuedAt: 1)
        let texts = [key.description, "\(key)", String(reflecting: key), token.description, "\(token)"]
        for text in texts {
            #expect(!text.contains(fixtures.privateKeyBody.prefix(16)))
            #expect(!text.contains(token.jwt.prefix(20)))
        }
        #expect(key.description.contains(Self.keyID))
    }

    @Test func generatedKeysSignTokensTheirPublicKeyVerifies() throws {
        let key = try ProviderTokenKey.generate(keyID: "ZZZ999YYY8", teamID: Self.teamID)
        let verifier = try ProviderTokenVerifier(publicKeysByKeyID: [key.keyID: key.publicKeyPEM])
        let verified = try verifier.verify(try key.makeToken(issuedAt: 42).jwt)
        #expect(verified == VerifiedProviderToken(keyID: "ZZZ999YYY8", teamID: Self.teamID, issuedAt: 42))
    }
}
