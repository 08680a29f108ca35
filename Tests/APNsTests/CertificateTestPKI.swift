// A small PKI made with the openssl command-line tool at test time: root CA, intermediate, a
// push-style leaf with Apple's topics and environment extensions, and the broken variants people
// run into (expired, not yet valid, wrong key, missing intermediate, .cer renamed .p12, ...).

import Foundation
import TestSupport

final class CertificateTestPKI: Sendable {
    let directory = TemporaryDirectory.lastingTheProcess(prefix: "apns-cred")
    static let p12Password = "p12 secret"
    static let pemKeyPassword = "pem secret"
    static let topics = ["com.example.app", "com.example.app.voip", "com.example.app.complication"]
    static let leafSubject = "/UID=com.example.app/CN=Apple Push Services: com.example.app/OU=TEAM123456/O=Example/C=US"

    func path(_ name: String) -> String { directory.file(name) }
    func bytes(_ name: String) -> [UInt8] { directory.read(name) }

    /// DER for Apple's topics extension: SEQUENCE { UTF8String topic, SEQUENCE { UTF8String kind } ... }.
    static func topicsExtension(_ entries: [(String, [String])]) -> [UInt8] {
        var body: [UInt8] = []
        for (topic, kinds) in entries {
            body += derElement(0x0C, Array(topic.utf8))
            body += derElement(0x30, kinds.flatMap { derElement(0x0C, Array($0.utf8)) })
        }
        return derElement(0x30, body)
    }

    static func derElement(_ tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
        let count = contents.count
        let length: [UInt8] =
            count < 0x80
            ? [UInt8(count)]
            : count < 0x100 ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        return [tag] + length + contents
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02X", $0) }.joined()
    }

    init() throws {
        let dir = directory.path
        func openssl(_ arguments: [String]) throws { try OpenSSLTool.run(arguments, in: dir) }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let topicsDER = Self.topicsExtension([
            ("com.example.app", ["app"]), ("com.example.app.voip", ["voip"]),
            ("com.example.app.complication", ["complication"]),
        ])
        directory.write(
            "extensions.cnf",
            """
            [req]
            distinguished_name = dn
            [dn]
            [root]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            [intermediate]
            basicConstraints = critical, CA:TRUE, pathlen:0
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [push]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = clientAuth
            1.2.840.113635.100.6.3.1 = DER:0500
            1.2.840.113635.100.6.3.2 = DER:0500
            1.2.840.113635.100.6.3.6 = DER:\(Self.hex(topicsDER))
            [sandboxonly]
            basicConstraints = critical, CA:FALSE
            extendedKeyUsage = clientAuth
            1.2.840.113635.100.6.3.1 = DER:0500
            [badtopics]
            basicConstraints = critical, CA:FALSE
            1.2.840.113635.100.6.3.6 = DER:3003020105
            [server]
            basicConstraints = critical, CA:FALSE
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:localhost

            """)
        try openssl(
            ["req", "-x509"] + ec + [
                "-keyout", "root.key", "-out", "root.pem", "-days", "30",
                "-subj", "/CN=Test Push Root CA", "-config", "extensions.cnf",
                "-extensions", "root",
            ])
        func issue(_ name: String, subject: String, signer: String, extensions: String, serial: Int) throws {
            try openssl(["req", "-new"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject])
            try openssl([
                "x509", "-req", "-in", "\(name).csr", "-CA", "\(signer).pem", "-CAkey", "\(signer).key",
                "-set_serial", String(serial), "-days", "365", "-extfile", "extensions.cnf",
                "-extensions", extensions, "-out", "\(name).pem",
            ])
        }
        try issue(
            "intermediate", subject: "/CN=Test Worldwide Developer Relations CA", signer: "root",
            extensions: "intermediate", serial: 2)
        try issue("leaf", subject: Self.leafSubject, signer: "intermediate", extensions: "push", serial: 3)
        try issue(
            "uidonly", subject: "/UID=com.example.uidonly/CN=Apple Development IOS Push Services",
            signer: "intermediate", extensions: "sandboxonly", serial: 4)
        try issue(
            "badtopics", subject: "/UID=com.example.fallback/CN=Bad topics", signer: "intermediate",
            extensions: "badtopics", serial: 5)
        try issue("server", subject: "/CN=localhost", signer: "root", extensions: "server", serial: 6)
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key"])

        // Expired and not-yet-valid leaves need explicit dates: `openssl ca` takes them (3.0's x509 cannot).
        directory.write(
            "ca.cnf",
            """
            [ca]
            default_ca = intermediate_ca
            [intermediate_ca]
            database = index.txt
            serial = serial.txt
            new_certs_dir = .
            certificate = intermediate.pem
            private_key = intermediate.key
            default_md = sha256
            policy = any
            unique_subject = no
            x509_extensions = push_dates
            [any]
            UID = optional
            CN = optional
            OU = optional
            O = optional
            C = optional
            [push_dates]
            basicConstraints = critical, CA:FALSE
            1.2.840.113635.100.6.3.2 = DER:0500

            """)
        directory.write("index.txt", "")
        directory.write("serial.txt", "10\n")
        try openssl([
            "ca", "-batch", "-config", "ca.cnf", "-in", "leaf.csr", "-notext", "-out", "expired.pem",
            "-startdate", "20200101000000Z", "-enddate", "20210101000000Z",
        ])
        try openssl([
            "ca", "-batch", "-config", "ca.cnf", "-in", "leaf.csr", "-notext", "-out", "future.pem",
            "-startdate", "20400101000000Z", "-enddate", "20410101000000Z",
        ])

        let password = "pass:\(Self.p12Password)"
        try openssl([
            "pkcs12", "-export", "-in", "leaf.pem", "-inkey", "leaf.key", "-certfile", "intermediate.pem",
            "-passout", password, "-out", "push.p12",
        ])
        try openssl([
            "pkcs12", "-export", "-legacy", "-in", "leaf.pem", "-inkey", "leaf.key",
            "-certfile", "intermediate.pem", "-passout", password, "-out", "legacy.p12",
        ])
        try openssl([
            "pkcs12", "-export", "-in", "leaf.pem", "-inkey", "leaf.key", "-passout", password,
            "-out", "nochain.p12",
        ])
        try openssl([
            "pkcs12", "-export", "-in", "leaf.pem", "-inkey", "leaf.key", "-certfile", "intermediate.pem",
            "-passout", "pass:", "-out", "nopassword.p12",
        ])
        try openssl(["pkcs12", "-export", "-nokeys", "-in", "leaf.pem", "-passout", password, "-out", "nokey.p12"])
        try openssl([
            "pkcs12", "-export", "-in", "expired.pem", "-inkey", "leaf.key", "-certfile", "intermediate.pem",
            "-passout", password, "-out", "expired.p12",
        ])
        try openssl(["x509", "-in", "leaf.pem", "-outform", "DER", "-out", "leaf.cer"])
        directory.write("renamed-cer.p12", bytes("leaf.cer"))
        let p12 = bytes("push.p12")
        directory.write("truncated.p12", Array(p12.prefix(p12.count / 2)))
        directory.write("random.p12", (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) | 0x01 })
        try openssl([
            "pkey", "-in", "leaf.key", "-aes256", "-passout", "pass:\(Self.pemKeyPassword)",
            "-out", "leaf-encrypted.key",
        ])
        directory.write("combined.pem", bytes("leaf.pem") + bytes("intermediate.pem") + bytes("leaf.key"))
        directory.write("leaf-and-chain.pem", bytes("leaf.pem") + bytes("intermediate.pem"))
        directory.write("notes.txt", "certificate goes here\n")
    }

    static let shared: CertificateTestPKI = {
        do { return try CertificateTestPKI() } catch { fatalError("cannot build the test PKI: \(error)") }
    }()
}
