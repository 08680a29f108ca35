// Loading push certificates from PKCS#12 and PEM: what they say (subject, dates, topics,
// environments, chain) and a distinct message for each common failure; mutual TLS with the identity.

import COpenSSL
import Foundation
import Testing

@testable import APNs

@Suite struct CertificateIdentityTests {
    let pki = CertificateTestPKI.shared

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
            #expect(!error.message.contains(CertificateTestPKI.p12Password), sourceLocation: sourceLocation)
            #expect(!error.message.contains(CertificateTestPKI.pemKeyPassword), sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
    }

    func p12(_ name: String, password: String? = CertificateTestPKI.p12Password, now: Date = Date()) throws
        -> CertificateIdentity
    {
        try CertificateIdentity(pkcs12File: pki.path(name), password: password, now: now)
    }

    // MARK: - What a good certificate says

    @Test func pkcs12WithChainReportsSubjectTopicsEnvironmentsAndDates() throws {
        let identity = try p12("push.p12")
        #expect(
            identity.subject
                == "UID=com.example.app, CN=Apple Push Services: com.example.app, OU=TEAM123456, O=Example, C=US")
        #expect(identity.commonName == "Apple Push Services: com.example.app")
        #expect(identity.issuer == "CN=Test Worldwide Developer Relations CA")
        #expect(identity.topics == CertificateTestPKI.topics)
        #expect(identity.environments == [.sandbox, .production])
        #expect(identity.chainCount == 1)
        #expect(identity.warnings.isEmpty)
        let days = identity.daysLeft()
        #expect((363...365).contains(days))
        #expect(identity.daysLeft(at: identity.notAfter.addingTimeInterval(-86_400 * 10 - 5)) == 10)
        #expect(identity.notAfter.timeIntervalSince(identity.notBefore) == 365 * 86_400)
    }

    @Test func legacyEncryptedPKCS12Loads() throws {
        let identity = try p12("legacy.p12")
        #expect(identity.topics == CertificateTestPKI.topics)
        #expect(identity.chainCount == 1)
    }

    @Test func pkcs12ExportedWithoutPasswordLoadsWithNone() throws {
        #expect(try p12("nopassword.p12", password: nil).topics.first == "com.example.app")
    }

    @Test func pemCertificateWithSeparateKeyLoads() throws {
        let identity = try CertificateIdentity(
            certificateFile: pki.path("leaf-and-chain.pem"),
            keyFile: pki.path("leaf.key"))
        #expect(identity.topics == CertificateTestPKI.topics)
        #expect(identity.chainCount == 1 && identity.warnings.isEmpty)
    }

    @Test func pemCertificateWithKeyInTheSameFileLoads() throws {
        let identity = try CertificateIdentity(certificateFile: pki.path("combined.pem"))
        #expect(identity.subject.hasPrefix("UID=com.example.app"))
        #expect(identity.chainCount == 1)
    }

    @Test func encryptedPEMKeyLoadsWithItsPassword() throws {
        let identity = try CertificateIdentity(
            certificateFile: pki.path("leaf.pem"),
            keyFile: pki.path("leaf-encrypted.key"),
            password: CertificateTestPKI.pemKeyPassword)
        #expect(identity.commonName == "Apple Push Services: com.example.app")
    }

    @Test func certificateFileIsToldApartByContent() throws {
        // The same entry point takes PKCS#12 and PEM.
        let fromP12 = try CertificateIdentity(
            certificateFile: pki.path("push.p12"),
            password: CertificateTestPKI.p12Password)
        let fromPEM = try CertificateIdentity(certificateFile: pki.path("combined.pem"))
        #expect(fromP12.subject == fromPEM.subject)
    }

    @Test func withoutTopicsExtensionTheSubjectUIDIsTheTopic() throws {
        let identity = try CertificateIdentity(
            certificateFile: pki.path("uidonly.pem"),
            keyFile: pki.path("uidonly.key"))
        #expect(identity.topics == ["com.example.uidonly"])
        #expect(identity.environments == .sandbox)
        #expect(identity.warnings.count == 1)  // no intermediate in this PEM
    }

    @Test func malformedTopicsExtensionFallsBackToUIDWithAWarning() throws {
        let identity = try CertificateIdentity(
            certificateFile: pki.path("badtopics.pem"),
            keyFile: pki.path("badtopics.key"))
        #expect(identity.topics == ["com.example.fallback"])
        #expect(identity.environments.isEmpty)
        #expect(identity.warnings.contains { $0.contains("topics extension") && $0.contains("malformed") })
    }

    @Test func missingIntermediateIsAWarningNotAnError() throws {
        let identity = try p12("nochain.p12")
        #expect(identity.chainCount == 0)
        #expect(identity.warnings.count == 1)
        #expect(identity.warnings[0].contains("lacks the intermediate"))
        #expect(identity.warnings[0].contains("CN=Test Worldwide Developer Relations CA"))
    }

    @Test func descriptionShowsSubjectButNoSecrets() throws {
        let identity = try p12("push.p12")
        #expect(identity.description.contains("UID=com.example.app"))
        let keyText = String(decoding: pki.bytes("leaf.key"), as: UTF8.self)
        let keyBody = keyText.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        #expect(!identity.description.contains(keyBody.prefix(16)))
    }

    // MARK: - Each failure has its own message

    @Test func missingFileSaysNotFound() {
        expectError(.fileNotFound, containing: ["not found", "/nonexistent/push.p12"]) {
            _ = try CertificateIdentity(pkcs12File: "/nonexistent/push.p12", password: nil)
        }
        expectError(.fileNotFound, containing: ["not found"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("leaf.pem"), keyFile: "/nonexistent/leaf.key")
        }
    }

    @Test func wrongPasswordIsToldApartFromDamage() {
        expectError(.wrongPassword, containing: ["password", "is wrong"]) {
            _ = try p12("push.p12", password: "not the password")
        }
        expectError(.wrongPassword, containing: ["is wrong"]) { _ = try p12("legacy.p12", password: "nope") }
    }

    @Test func missingPasswordAsksForOne() {
        let fragments = ["protected by a password", "--password-file", "APNS_CERT_PASSWORD"]
        expectError(.passwordRequired, containing: fragments) {
            _ = try p12("push.p12", password: nil)
        }
    }

    @Test func derCertificateRenamedToP12SaysItIsACer() {
        expectError(
            .certificateInsteadOfPKCS12,
            containing: ["DER certificate (.cer)", "Apple Push Services: com.example.app", "no private key"]
        ) {
            _ = try p12("renamed-cer.p12")
        }
        // Also when handed to the content-sniffing entry point.
        expectError(.certificateInsteadOfPKCS12, containing: [".cer"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("renamed-cer.p12"), password: "x")
        }
    }

    @Test func truncatedP12IsCalledDamaged() {
        expectError(.corruptPKCS12, containing: ["truncated or damaged"]) { _ = try p12("truncated.p12") }
    }

    @Test func randomBytesAreNotPKCS12() {
        expectError(.notPKCS12, containing: ["not a PKCS#12"]) { _ = try p12("random.p12") }
    }

    @Test func pemGivenAsP12SaysItIsPEM() {
        expectError(.notPKCS12, containing: ["PEM text", "openssl pkcs12 -export"]) { _ = try p12("combined.pem") }
    }

    @Test func p12WithoutKeySaysExportTheKeyToo() {
        expectError(.missingPrivateKey, containing: ["no private key", "together"]) { _ = try p12("nokey.p12") }
    }

    @Test func expiredCertificateSaysWhenAndWhatToDo() {
        expectError(.certificateExpired, containing: ["expired on 2021-01-01", "days ago", "new Apple Push"]) {
            _ = try p12("expired.p12")
        }
        expectError(.certificateExpired, containing: ["expired on 2021-01-01"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("expired.pem"), keyFile: pki.path("leaf.key"))
        }
    }

    @Test func certificatePastItsEndAtTheGivenTimeIsExpired() throws {
        let notAfter = try p12("push.p12").notAfter
        expectError(.certificateExpired, containing: ["1 days ago"]) {
            _ = try p12("push.p12", now: notAfter.addingTimeInterval(86_400 + 60))
        }
    }

    @Test func notYetValidCertificateSaysWhenItStarts() {
        expectError(.certificateNotYetValid, containing: ["not valid yet", "2040-01-01", "clock"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("future.pem"), keyFile: pki.path("leaf.key"))
        }
    }

    @Test func keyOfAnotherCertificateIsAMismatch() {
        expectError(.keyCertificateMismatch, containing: ["does not belong", "UID=com.example.app"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("leaf.pem"), keyFile: pki.path("other.key"))
        }
    }

    @Test func encryptedPEMKeyWithoutPasswordAsksForOne() {
        expectError(.passwordRequired, containing: ["encrypted", "leaf-encrypted.key"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("leaf.pem"), keyFile: pki.path("leaf-encrypted.key"))
        }
        expectError(.wrongPassword, containing: ["password is wrong"]) {
            _ = try CertificateIdentity(
                certificateFile: pki.path("leaf.pem"),
                keyFile: pki.path("leaf-encrypted.key"), password: "wrong")
        }
    }

    @Test func pemCertificateWithoutKeySaysPassTheKey() {
        expectError(.missingPrivateKey, containing: ["no private key", "--key-file"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("leaf.pem"))
        }
    }

    @Test func textThatIsNotPEMSaysSo() {
        expectError(.notPEM, containing: ["not PEM", "BEGIN CERTIFICATE"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("notes.txt"), keyFile: pki.path("leaf.key"))
        }
        expectError(.notPEM, containing: ["DER (binary) certificate", "openssl x509 -inform DER"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("leaf.cer"), keyFile: pki.path("leaf.key"))
        }
    }

    @Test func keyGivenAsCertificateSaysNoCertificate() {
        expectError(.missingCertificate, containing: ["no certificate"]) {
            _ = try CertificateIdentity(certificateFile: pki.path("leaf.key"), keyFile: pki.path("leaf.key"))
        }
    }

    // MARK: - Topics extension parser

    @Test func topicsParserReadsTopicsAndSkipsKinds() {
        let der = CertificateTestPKI.topicsExtension([("a.b", ["app"]), ("a.b.voip", ["voip", "x"]), ("c", [])])
        #expect(ApplePushCertificateExtensions.topics(fromExtensionValue: der) == ["a.b", "a.b.voip", "c"])
    }

    @Test func topicsParserRejectsMalformedValues() {
        let element = CertificateTestPKI.derElement
        let tooMany = element(
            0x30,
            (0...ApplePushCertificateExtensions.maximumTopics).flatMap { _ in
                element(0x0C, Array("t".utf8))
            })
        let cases: [[UInt8]] = [
            [],
            element(0x31, element(0x0C, Array("a".utf8))),  // SET, not SEQUENCE
            element(0x30, element(0x02, [1])),  // INTEGER inside
            element(0x30, element(0x0C, [])),  // empty topic
            element(0x30, element(0x0C, [0x61, 0x20, 0x62])),  // space in topic
            element(0x30, element(0x0C, [0xC3])),  // invalid UTF-8
            element(0x30, element(0x0C, Array("a".utf8))) + [0x00],  // trailing byte
            [0x30, 0x05, 0x0C, 0x09, 0x61],  // inner length past the end
            tooMany,
        ]
        for value in cases {
            #expect(ApplePushCertificateExtensions.topics(fromExtensionValue: value) == nil, "\(value.prefix(8))")
        }
    }

    // MARK: - Mutual TLS

    @Test func installedIdentityCompletesMutualTLSWithTheChain() throws {
        let identity = try p12("push.p12")
        let result = try TLSHandshakePair.run(clientIdentity: identity, pki: pki)
        #expect(result.serverVerified)
        #expect(result.peerSubject == identity.subject)
    }

    @Test func withoutTheIntermediateTheServerRefusesTheClient() throws {
        let identity = try p12("nochain.p12")
        let result = try TLSHandshakePair.run(clientIdentity: identity, pki: pki)
        #expect(!result.serverVerified)
    }

    @Test func installReplacesAnEarlierIdentity() throws {
        let context = try #require(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(context) }
        let first = try CertificateIdentity(certificateFile: pki.path("uidonly.pem"), keyFile: pki.path("uidonly.key"))
        try first.install(into: context)
        let second = try p12("push.p12")
        try second.install(into: context)
        let installed = try #require(SSL_CTX_get0_certificate(context))
        #expect(X509_cmp(installed, second.certificate) == 0)
    }
}

/// A TLS client and server joined by an in-memory BIO pair: the server requires a client
/// certificate that chains to the test root.
enum TLSHandshakePair {
    struct Result {
        var serverVerified: Bool
        var peerSubject: String?
    }

    static func run(clientIdentity: CertificateIdentity, pki: CertificateTestPKI) throws -> Result {
        let serverContext = try #require(SSL_CTX_new(TLS_server_method()))
        let clientContext = try #require(SSL_CTX_new(TLS_client_method()))
        defer {
            SSL_CTX_free(serverContext)
            SSL_CTX_free(clientContext)
        }
        try #require(SSL_CTX_use_certificate_file(serverContext, pki.path("server.pem"), SSL_FILETYPE_PEM) == 1)
        try #require(SSL_CTX_use_PrivateKey_file(serverContext, pki.path("server.key"), SSL_FILETYPE_PEM) == 1)
        try #require(SSL_CTX_load_verify_locations(serverContext, pki.path("root.pem"), nil) == 1)
        SSL_CTX_set_verify(serverContext, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        try clientIdentity.install(into: clientContext)
        try #require(SSL_CTX_load_verify_locations(clientContext, pki.path("root.pem"), nil) == 1)
        SSL_CTX_set_verify(clientContext, SSL_VERIFY_PEER, nil)

        let server = try #require(SSL_new(serverContext))
        let client = try #require(SSL_new(clientContext))
        defer {
            SSL_free(server)
            SSL_free(client)
        }
        var clientBIO: OpaquePointer?
        var serverBIO: OpaquePointer?
        try #require(BIO_new_bio_pair(&clientBIO, 0, &serverBIO, 0) == 1)
        SSL_set_bio(client, clientBIO, clientBIO)
        SSL_set_bio(server, serverBIO, serverBIO)
        SSL_set_connect_state(client)
        SSL_set_accept_state(server)

        var clientDone = false
        var serverDone = false
        var failed = false
        for _ in 0..<50 where !(clientDone && serverDone) && !failed {
            for (ssl, isClient) in [(client, true), (server, false)] where !(isClient ? clientDone : serverDone) {
                let status = SSL_do_handshake(ssl)
                if status == 1 {
                    if isClient { clientDone = true } else { serverDone = true }
                } else {
                    let error = SSL_get_error(ssl, status)
                    if error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE { failed = true }
                }
            }
        }
        ERR_clear_error()
        let verified = serverDone && !failed && SSL_get_verify_result(server) == X509_V_OK
        var subject: String?
        if let peer = SSL_get1_peer_certificate(server) {
            subject = X509Text.name(X509_get_subject_name(peer))
            X509_free(peer)
        }
        return Result(serverVerified: verified, peerSubject: subject)
    }
}
