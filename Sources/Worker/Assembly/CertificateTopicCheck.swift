// `run --check`: every app that pushes with a certificate must find its topics in that certificate.
// Apple: "These extensions list all the push topics allowed for your certificate. If a push topic for a
// specific push type isn't listed, you can't use the certificate to send a notification of that push
// type" (Sending notification requests to APNs); APNs answers such a push with TopicDisallowed.

import APNs
import Foundation
public import PushRules

public enum CertificateTopicCheck {
    /// The problems of every (app, certificate credential) pair: a topic the app's push types need
    /// (the bundle id with the suffix of each push type its rules send, the bare bundle id when no rule
    /// names the app) that the certificate does not list, or a push type Apple takes only with token
    /// authentication. Token credentials push to every topic of their team, so they are not checked.
    public static func problems(
        configuration: WorkerConfiguration, credentials: [String: LoadedCredential], pushTypes: RulePushTypes
    ) -> [ConfigurationProblem] {
        var problems: [ConfigurationProblem] = []
        for (bundle, app) in configuration.apps.sorted(by: { $0.key < $1.key }) {
            var types = pushTypes.pushTypes(forApp: bundle)
            if types.isEmpty { types = [.alert] }
            let orderedTypes = PushType.allCases.filter(types.contains)
            var checked: Set<String> = []
            for (key, name) in [("credential", app.credential), ("sandbox_credential", app.sandboxCredential)] {
                guard let name, checked.insert(name).inserted,
                    let identity = credentials[name]?.identity, !identity.topics.isEmpty
                else { continue }
                let path = "apps.\(bundle).\(key)"
                let listed = identity.topics.joined(separator: ", ")
                for type in orderedTypes where type.requiresTokenAuthentication {
                    problems.append(
                        ConfigurationProblem(
                            path: path,
                            message:
                                "the rules send \(type) pushes for \(bundle), which APNs takes only with token "
                                + "authentication, but credential '\(name)' is a certificate; give the app a "
                                + "credential of type token (a .p8 key)"))
                }
                let needed = orderedTypes.filter { !$0.requiresTokenAuthentication && $0 != .mdm }
                    .map { $0.topic(forBundle: bundle) }
                let missing = needed.filter { !identity.topics.contains($0) }
                guard !missing.isEmpty else { continue }
                problems.append(
                    ConfigurationProblem(
                        path: path,
                        message:
                            "credential '\(name)' is a certificate for the topics \(listed); app \(bundle) needs "
                            + missing.joined(separator: ", ") + " (for its "
                            + orderedTypes.map(\.rawValue).joined(separator: ", ")
                            + " pushes), which it does not list, so APNs would refuse those pushes "
                            + "(TopicDisallowed); use the certificate issued for \(bundle) with those push "
                            + "services, or a token credential"))
            }
        }
        return problems
    }
}
