// Test fixtures for credentials, made at test time with the openssl command-line tool in a fresh
// temporary directory: P-256/P-384/RSA keys in the formats people get wrong, and a small PKI (root,
// intermediate, push-style leaves) for certificate tests.

import Foundation
import TestSupport
import Testing

/// Runs the openssl command-line tool.
enum OpenSSLTool {
    /// Runs `openssl <arguments>` in `directory`; returns standard output, throws `TestFailure` with
    /// standard error on failure.
    @discardableResult
    static func run(_ arguments: [String], in directory: String, input: [UInt8]? = nil) throws -> [UInt8] {
        try runProcessOutput("/usr/bin/openssl", arguments, in: directory, input: input)
    }
}

/// Signing keys in the shapes a `.p8` loader must accept or reject with a clear message.
final class SigningKeyFixtures: Sendable {
    let directory = TemporaryDirectory.lastingTheProcess(prefix: "apns-cred")
    /// PKCS#8 PEM P-256, like Apple's .p8.
    var p256: String { directory.file("AuthKey.p8") }
    var p256PublicKey: String { directory.file("AuthKey.pub.pem") }
    var p256DER: String { directory.file("AuthKey.der") }
    /// SEC1 "EC PRIVATE KEY" P-256 (also accepted).
    var p256SEC1: String { directory.file("sec1.pem") }
    var p384: String { directory.file("p384.p8") }
    var rsa: String { directory.file("rsa.p8") }
    /// PKCS#8 encrypted with the password "correct horse".
    var p256Encrypted: String { directory.file("encrypted.p8") }
    /// Traditional OpenSSL encryption (Proc-Type: 4,ENCRYPTED), password "correct horse".
    var p256EncryptedSEC1: String { directory.file("encrypted-sec1.pem") }
    var publicKeyOnly: String { directory.file("public-only.pem") }
    var randomText: String { directory.file("notes.txt") }
    static let password = "correct horse"

    init() throws {
        let dir = directory.path
        try OpenSSLTool.run(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p256],
            in: dir)
        try OpenSSLTool.run(["pkey", "-in", p256, "-pubout", "-out", p256PublicKey], in: dir)
        try OpenSSLTool.run(["pkey", "-in", p256, "-outform", "DER", "-out", p256DER], in: dir)
        try OpenSSLTool.run(["ec", "-in", p256, "-out", p256SEC1], in: dir)
        try OpenSSLTool.run(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", p384],
            in: dir)
        try OpenSSLTool.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", rsa], in: dir)
        try OpenSSLTool.run(
            [
                "pkcs8", "-topk8", "-in", p256, "-v2", "aes-256-cbc", "-passout", "pass:\(Self.password)",
                "-out", p256Encrypted,
            ], in: dir)
        try OpenSSLTool.run(
            [
                "ec", "-in", p256, "-aes256", "-passout", "pass:\(Self.password)",
                "-out", p256EncryptedSEC1,
            ], in: dir)
        try OpenSSLTool.run(["pkey", "-in", p256, "-pubout", "-out", publicKeyOnly], in: dir)
        directory.write("notes.txt", "This is not a key.\nTeam notes: push certificates live in the vault.\n")
    }

    /// The base64 body of the private key PEM, to check it never leaks into text.
    var privateKeyBody: String {
        let text = String(decoding: directory.read("AuthKey.p8"), as: UTF8.self)
        return text.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    static let shared: SigningKeyFixtures = {
        do { return try SigningKeyFixtures() } catch { fatalError("cannot make key fixtures: \(error)") }
    }()
}
