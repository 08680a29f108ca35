// `apns-worker token`: signs one APNs provider token (JWT) from a .p8 key, for use with curl.

import APNs
import Foundation

struct TokenCommand: Command {
    static let name = "token"
    static let summary = "Print an APNs provider token (JWT, ES256) signed with a .p8 key."
    static let discussion = """
        The token is valid for one hour from now. It is a secret: paste it where it is needed, do not
        log it. An encrypted key's password is read from --key-password-file or APNS_KEY_PASSWORD.

        example:
          apns-worker token --key-file AuthKey_ABC123DEFG.p8 --key-id ABC123DEFG --team-id DEF123GHIJ
          curl --http2 -H "authorization: bearer $(apns-worker token ...)" -H 'apns-topic: com.example.app' ...
        """
    static let options: [OptionSpec] = [
        .value("--key-file", "FILE", "The .p8 signing key from Apple (PKCS#8 PEM, EC P-256)."),
        .value("--key-id", "KEY_ID", "The key's 10-character Key ID."),
        .value("--team-id", "TEAM_ID", "Your 10-character Team ID."),
        .value("--key-password-file", "FILE", "File holding the password of an encrypted key (first line)."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let key = try CredentialOptions.loadSigningKey(arguments)
        let token = try key.makeToken(issuedAt: ProviderTokenSigner.systemClock())
        print(token.jwt)
        return 0
    }
}

/// Reading credential options and passwords shared by `token` and `credentials inspect`.
/// Passwords come from files or the environment, never from the command line.
enum CredentialOptions {
    static let certificatePasswordVariable = CredentialFile.certificatePasswordVariable
    static let keyPasswordVariable = CredentialFile.keyPasswordVariable

    static func loadSigningKey(_ arguments: ParsedArguments) throws -> ProviderTokenKey {
        let file = try arguments.required("--key-file")
        guard let keyID = arguments.value("--key-id"), let teamID = arguments.value("--team-id") else {
            throw UsageError(
                message: "a .p8 key needs --key-id KEY_ID and --team-id TEAM_ID (10 characters each, "
                    + "from the Keys page and the Membership page of your Apple Developer account)")
        }
        let password = try password(file: arguments.value("--key-password-file"), variable: keyPasswordVariable)
        return try ProviderTokenKey(contentsOfFile: file, keyID: keyID, teamID: teamID, password: password)
    }

    /// The password from `file` if given, else from the environment variable, else nil.
    static func password(file: String?, variable: String) throws -> String? {
        if let file { return try CredentialFile.readPassword(file) }
        return ProcessInfo.processInfo.environment[variable]
    }
}
