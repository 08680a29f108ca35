// A throwaway server identity for TLS tests, made with the openssl command-line tool.

import Foundation

/// A self-signed certificate and key for `localhost` / 127.0.0.1 in a temporary directory.
package struct TestCertificate: Sendable {
    package let directory: String
    package let certificateFile: String
    package let keyFile: String

    package static func make(commonName: String = "localhost", subjectAltName: String = "DNS:localhost,IP:127.0.0.1")
        throws -> TestCertificate
    {
        let directory = NSTemporaryDirectory() + "h2test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let status = try runProcess(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=\(commonName)",
                "-addext", "subjectAltName=\(subjectAltName)",
            ])
        guard status == 0 else { throw TestFailure("openssl req failed with status \(status)") }
        return TestCertificate(directory: directory, certificateFile: certificate, keyFile: key)
    }
}
