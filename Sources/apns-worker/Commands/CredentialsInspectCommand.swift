// `apns-worker credentials inspect`: loads a certificate or a .p8 key the way the worker would and
// says what it is, what it may push to, when it expires, and what should be fixed.

import APNs
import Foundation
import JSON

struct CredentialsInspectCommand: Command {
    static let name = "credentials inspect"
    static let summary = "Check an APNs certificate (.p12/PEM) or .p8 key and show what it may push to."
    static let discussion = """
        Certificate auth: --cert-file with a .p12 (password from --password-file or APNS_CERT_PASSWORD),
        or a PEM certificate with its key in the same file or in --key-file.
        Token auth: --key-file with --key-id and --team-id (an encrypted key's password from
        --key-password-file or APNS_KEY_PASSWORD).
        Exit status: 0 usable, 1 not usable (the message says why), 2 bad usage.

        examples:
          apns-worker credentials inspect --cert-file push.p12 --password-file push.pass
          apns-worker credentials inspect --json --key-file AuthKey_ABC123DEFG.p8 \\
              --key-id ABC123DEFG --team-id DEF123GHIJ
        """
    static let options: [OptionSpec] = [
        .value("--cert-file", "FILE", "Client certificate: PKCS#12 (.p12) or PEM."),
        .value("--key-file", "FILE", "PEM private key of a PEM certificate, or the .p8 token key."),
        .value("--key-id", "KEY_ID", "Key ID of a .p8 key (10 characters)."),
        .value("--team-id", "TEAM_ID", "Team ID of a .p8 key (10 characters)."),
        .value("--password-file", "FILE", "File holding the .p12 (or encrypted PEM key) password."),
        .value("--key-password-file", "FILE", "File holding the password of an encrypted .p8 key."),
        .flag("--json", "Print one JSON object instead of text."),
    ]

    /// Certificates closer to expiry than this get a warning.
    static let expiryWarningDays = 30

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let json = arguments.has("--json")
        let report: JSONObject
        do {
            if let certificateFile = arguments.value("--cert-file") {
                if arguments.value("--key-id") != nil || arguments.value("--team-id") != nil {
                    throw UsageError(
                        message: "--key-id and --team-id belong to a .p8 key, not to --cert-file; "
                            + "give either --cert-file or --key-file with --key-id and --team-id")
                }
                report = try inspectCertificate(certificateFile, arguments: arguments)
            } else if arguments.value("--key-file") != nil {
                report = try inspectSigningKey(arguments)
            } else {
                throw UsageError(
                    message: "give --cert-file FILE (certificate auth) or --key-file FILE --key-id KEY_ID "
                        + "--team-id TEAM_ID (token auth)")
            }
        } catch let error as CredentialError {
            if json {
                let details: JSONValue = ["code": .string(error.code.description), "message": .string(error.message)]
                let object: JSONValue = ["usable": false, "error": details]
                print(object.compactString)
            } else {
                standardError("apns-worker credentials inspect: \(error.message)")
            }
            return 1
        }
        print(json ? JSONValue.object(report).compactString : text(report))
        return 0
    }

    static func inspectCertificate(_ file: String, arguments: ParsedArguments) throws -> JSONObject {
        let password = try CredentialOptions.password(
            file: arguments.value("--password-file"), variable: CredentialOptions.certificatePasswordVariable)
        let identity = try CertificateIdentity(
            certificateFile: file, keyFile: arguments.value("--key-file"),
            password: password)
        let now = Date()
        let daysLeft = identity.daysLeft(at: now)
        var warnings = identity.warnings
        if daysLeft < expiryWarningDays {
            warnings.append(
                "the certificate expires in \(daysLeft) days; renew it in Certificates, Identifiers & "
                    + "Profiles before then")
        }
        var environments: [JSONValue] = []
        if identity.environments.contains(.sandbox) { environments.append("sandbox") }
        if identity.environments.contains(.production) { environments.append("production") }
        return [
            "usable": true,
            "kind": "certificate",
            "file": .string(file),
            "subject": .string(identity.subject),
            "issuer": .string(identity.issuer),
            "topics": .array(identity.topics.map { .string($0) }),
            "environments": .array(environments),
            "not_before": .string(timestamp(identity.notBefore)),
            "not_after": .string(timestamp(identity.notAfter)),
            "days_left": .int(Int64(daysLeft)),
            "chain_certificates": .int(Int64(identity.chainCount)),
            "warnings": .array(warnings.map { .string($0) }),
        ]
    }

    static func inspectSigningKey(_ arguments: ParsedArguments) throws -> JSONObject {
        let key = try CredentialOptions.loadSigningKey(arguments)
        // Sign and verify once, so a key that loads but cannot sign is caught here, not at the first push.
        let token = try key.makeToken(issuedAt: ProviderTokenSigner.systemClock())
        do {
            _ = try ProviderTokenVerifier(trusting: [key]).verify(token.jwt)
        } catch {
            throw CredentialError(
                .signingFailed,
                "a token signed with this key does not verify (\(error)); "
                    + "the key file may be damaged — download a new key")
        }
        return [
            "usable": true,
            "kind": "provider-token-key",
            "file": .string(try arguments.required("--key-file")),
            "key_id": .string(key.keyID),
            "team_id": .string(key.teamID),
            "algorithm": "ES256 (EC P-256)",
            "topics": .array([]),
            "pushes_to": .string(
                "every app (topic) of team \(key.teamID); both environments unless the key is "
                    + "restricted to one in your developer account"),
            "expires": .null,
            "token_lifetime_seconds": .int(ProviderTokenSigner.maximumRefreshAge),
            "token_refresh_seconds": .int(ProviderTokenSigner.defaultRefreshAge),
            "warnings": .array([]),
        ]
    }

    static func text(_ report: JSONObject) -> String {
        var lines: [(String, String)] = []
        if report["kind"]?.stringValue == "certificate" {
            lines.append(("credential", "client certificate (mutual TLS)"))
            lines.append(("file", report["file"]?.stringValue ?? ""))
            lines.append(("subject", report["subject"]?.stringValue ?? ""))
            lines.append(("issuer", report["issuer"]?.stringValue ?? ""))
            let topics = report["topics"]?.arrayValue?.compactMap(\.stringValue) ?? []
            lines.append(("pushes to", topics.isEmpty ? "(no topics named)" : topics.joined(separator: ", ")))
            let environments = report["environments"]?.arrayValue?.compactMap(\.stringValue) ?? []
            lines.append(("environments", environments.isEmpty ? "not stated" : environments.joined(separator: ", ")))
            let days = report["days_left"]?.intValue ?? 0
            let from = report["not_before"]?.stringValue ?? ""
            let to = report["not_after"]?.stringValue ?? ""
            lines.append(("valid", "\(from) to \(to) (\(days) days left)"))
            lines.append(("chain", "\(report["chain_certificates"]?.intValue ?? 0) more certificate(s)"))
        } else {
            lines.append(("credential", "provider token key (.p8, ES256 / EC P-256)"))
            lines.append(("file", report["file"]?.stringValue ?? ""))
            lines.append(("key id", report["key_id"]?.stringValue ?? ""))
            lines.append(("team id", report["team_id"]?.stringValue ?? ""))
            lines.append(("pushes to", report["pushes_to"]?.stringValue ?? ""))
            lines.append(("expires", "never; each token lasts 60 minutes and is replaced after 50"))
            lines.append(("self-check", "signed and verified a token"))
        }
        for warning in report["warnings"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            lines.append(("warning", warning))
        }
        return lines.map { $0.0 + ":" + String(repeating: " ", count: max(1, 14 - $0.0.count)) + $0.1 }
            .joined(separator: "\n")
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
