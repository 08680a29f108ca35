// The `credentials` section of worker.yaml: token (.p8) and certificate (.p12 or PEM) credentials by
// name, their files checked, and inline secrets refused with where the secret belongs instead.

import JSON

extension ConfigurationDecoder {
    /// Keys people try for inline secrets; each gets the message that secrets live in files. They are
    /// never offered as the right spelling of an unknown key.
    static let inlineSecretKeys = ["key", "password", "key_password", "private_key", "p8", "secret"]
    static let tokenKeys = ["type", "key_file", "key_id", "team_id", "key_password_file"]
    static let certificateKeys = ["type", "cert_file", "password_file", "key_file"]

    /// Decodes `credentials`, reporting what is wrong with each entry.
    mutating func credentials(_ value: JSONValue?) -> [String: WorkerConfiguration.Credential] {
        var credentials: [String: WorkerConfiguration.Credential] = [:]
        guard let object = object(value, "credentials"), !object.isEmpty else {
            problem("credentials", "is required: at least one credential (a .p8 key or a certificate) by name")
            return credentials
        }
        for member in object {
            let path = "credentials." + member.key
            guard let credential = self.object(member.value, path) else { continue }
            switch credential["type"]?.stringValue {
            case "token":
                checkKeys(credential, at: path, known: Self.tokenKeys, reportedElsewhere: Self.inlineSecretKeys)
                credentials[member.key] = token(credential, at: path)
            case "certificate":
                checkKeys(
                    credential, at: path, known: Self.certificateKeys, reportedElsewhere: Self.inlineSecretKeys)
                let certFile = string(credential, "cert_file", path, required: true)
                let passwordFile = string(credential, "password_file", path)
                let keyFile = string(credential, "key_file", path)
                checkFile(certFile, at: path + ".cert_file")
                checkFile(passwordFile, at: path + ".password_file")
                checkFile(keyFile, at: path + ".key_file")
                if let certFile {
                    credentials[member.key] = .certificate(
                        certFile: certFile, passwordFile: passwordFile, keyFile: keyFile)
                }
            case let other:
                problem(
                    path + ".type",
                    other == nil
                        ? "is required: token or certificate"
                        : "must be token or certificate, found '\(other!.prefix(30))'")
            }
            for secretKey in Self.inlineSecretKeys where credential[secretKey] != nil {
                let fileKey =
                    credential["type"]?.stringValue == "certificate"
                    ? "cert_file, key_file or password_file" : "key_file or key_password_file"
                problem(
                    path + "." + secretKey,
                    "secrets are never written inline; put the secret in a file and name it with \(fileKey)")
            }
        }
        return credentials
    }

    private mutating func token(_ credential: JSONObject, at path: String) -> WorkerConfiguration.Credential? {
        let keyFile = string(credential, "key_file", path, required: true)
        let keyID = string(credential, "key_id", path, required: true)
        let teamID = string(credential, "team_id", path, required: true)
        let passwordFile = string(credential, "key_password_file", path)
        for (value, key) in [(keyID, "key_id"), (teamID, "team_id")] {
            if let value, !WorkerConfiguration.isAppleIdentifier(value) {
                problem(
                    path + "." + key,
                    "must be the 10-character \(key == "key_id" ? "Key" : "Team") ID (A-Z, 0-9) from Apple's "
                        + "developer account, found '\(value.prefix(20))'")
            }
        }
        checkFile(keyFile, at: path + ".key_file")
        checkFile(passwordFile, at: path + ".key_password_file")
        guard let keyFile, let keyID, let teamID else { return nil }
        return .token(keyFile: keyFile, keyID: keyID, teamID: teamID, keyPasswordFile: passwordFile)
    }
}
