// `apns-worker credentials generate-key`: a fresh P-256 signing key in Apple's .p8 form and its public
// half, for running the worker against `apns-worker simulator` (which trusts the public key) on one machine.

import APNs
import Foundation

struct CredentialsGenerateKeyCommand: Command {
    static let name = "credentials generate-key"
    static let summary = "Make a P-256 .p8 signing key and its public key, for trying the worker with the simulator."
    static let discussion = """
        Writes the private key as unencrypted PKCS#8 PEM (what Apple's AuthKey_KEYID.p8 files hold) with
        mode 0600, and the public key as PEM for `apns-worker simulator --public-key-file`. Existing files
        are never overwritten. Apple does not know such a key: it is for the simulator only.

        example:
          apns-worker credentials generate-key --key-file AuthKey_SIMKEY0001.p8 --public-key-file sim-key.pub
          apns-worker simulator --key-id SIMKEY0001 --public-key-file sim-key.pub
        """
    static let options: [OptionSpec] = [
        .value("--key-file", "FILE", "Where to write the private key (.p8, mode 0600)."),
        .value("--public-key-file", "FILE", "Where to write its public key (PEM)."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let keyFile = try arguments.required("--key-file")
        let publicKeyFile = try arguments.required("--public-key-file")
        guard keyFile != publicKeyFile else {
            throw UsageError(message: "--key-file and --public-key-file must be two different files")
        }
        // The identifiers are the token's, not the key's: any valid pair serves to make one.
        let key = try ProviderTokenKey.generate(keyID: "GENERATED0", teamID: "GENERATED0")
        do {
            try write(key.privateKeyPEM, to: keyFile, mode: 0o600)
            try write(key.publicKeyPEM, to: publicKeyFile, mode: 0o644)
        } catch let problem as FileProblem {
            standardError("apns-worker credentials generate-key: \(problem.description)")
            return 1
        }
        print("private key: \(keyFile)")
        print("public key: \(publicKeyFile)")
        return 0
    }

    struct FileProblem: Error, CustomStringConvertible {
        var description: String
    }

    /// Creates `path` (never replacing a file) with `mode` and writes `text` to it.
    static func write(_ text: String, to path: String, mode: mode_t) throws {
        guard !text.isEmpty else { throw FileProblem(description: "OpenSSL could not encode the key for \(path)") }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            let hint = errno == EEXIST ? "; remove it or choose another path" : ""
            throw FileProblem(description: "cannot create \(path): \(reason)\(hint)")
        }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes {
                Foundation.write(descriptor, $0.baseAddress! + written, $0.count - written)
            }
            guard count > 0 else {
                throw FileProblem(description: "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            written += count
        }
    }
}
