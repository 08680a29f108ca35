"""The Helm chart in helm/apns-worker, rendered by the real Helm engine (helm-python-sdk, offline): it lints
clean, renders with the default values and with every option on, and the manifests pass kubernetes-validate
--strict for a current Kubernetes, yamllint, and the chart's own rules (both autoscalers at once, a grace
period shorter than the drain timeout, more replicas than partitions all fail with a clear message). The
worker.yaml it renders satisfies schemas/worker-config.schema.json. KEDA gets a TriggerAuthentication built from the
worker's own Kafka settings and starts a new group where the worker does; the pod conventions (envFrom, extra
volumes, annotations, labels, priority class) and the NetworkPolicy render exactly what their values say.
values.schema.json checks config exactly as worker-config.schema.json does (generated from it; stale fails), so a
typo fails `helm install`; a preflight hook (and optionally an init container) runs `run --check` with the pods'
own files before anything is applied; the rules live in a ConfigMap of their own mounted as a directory, so a rules
change rolls no pod, and the worker reloads them when the kubelet swaps ..data (run with the real binary)."""

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from test_schemas import schema_errors

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "apns-worker"
BIN = Path(sys.executable).parent
KUBE_VERSIONS = ["1.29.0", "1.37.0"]  # the oldest release still common in managed clusters, and the newest
# Custom resources kubernetes-validate has no schema for; test_custom_resources checks them instead.
CRD_KINDS = {"ServiceMonitor", "ScaledObject", "TriggerAuthentication"}
YAMLLINT_CONFIG = ("{extends: default, rules: {document-start: disable, line-length: {max: 160},"
                   # toYaml writes block sequences unindented, hand-written templates indent them.
                   " indentation: {spaces: 2, indent-sequences: whatever}}}")


# The least an install needs beside the defaults: a credential and an app (values.yaml has none: Helm would merge
# an example into the user's own).
MINIMAL = {"config": {
    "credentials": {"team-key": {"type": "token", "key_file": "/etc/apns-worker/credentials/AuthKey_ABC123DEFG.p8",
                                 "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"}},
    "apps": {"com.example.app": {"credential": "team-key"}}}}


def deep_merged(base, overrides):
    result = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def values_file(name):
    return helm.values_from_yaml((CHART / "ci" / f"{name}-values.yaml").read_text())


def render(values=None, name="push", namespace="notify"):
    with helm.Chart.load(str(CHART)) as chart:
        return chart.render(values=MINIMAL if values is None else values, name=name, namespace=namespace,
                            is_install=True)


def joined(rendered):
    """Like `helm template`: every non-empty manifest with a Source comment, NOTES.txt left out."""
    return "\n".join(f"---\n# Source: {path}\n{text}" for path, text in sorted(rendered.items())
                     if path.endswith((".yaml", ".yml")) and text.strip())


def manifests(values=None):
    return [doc for doc in yaml.safe_load_all(joined(render(values))) if doc]


def by_kind(docs):
    result = {}
    for doc in docs:
        result.setdefault(doc["kind"], []).append(doc)
    return result


def workload(docs):
    kinds = by_kind(docs)
    (found,) = kinds.get("Deployment", []) + kinds.get("StatefulSet", [])
    return found


def render_error(values):
    with pytest.raises(helm.HelmError) as raised:
        render(values)
    return str(raised.value)


def with_values(base, **changes):
    values = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = values
        parts = dotted.split("__")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return values


VARIANTS = {
    "minimal": MINIMAL,
    "production": values_file("production"),
    "all-options": values_file("all-options"),
    "hpa": with_values(values_file("all-options"), autoscaling__keda__enabled=False, autoscaling__hpa__enabled=True),
}


# ---------------------------------------------------------------------------------------------------
# Lint and validate

@pytest.mark.parametrize("variant", VARIANTS)
def test_lints_clean_in_strict_mode(variant):
    report = helm.lint(str(CHART), VARIANTS[variant], strict=True, kube_version="v1.37.0")
    assert report["errors"] == [], report
    assert all(message["severity"] == 1 for message in report["messages"]), report["messages"]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_manifests_pass_strict_kubernetes_validation(variant, kube_version, tmp_path):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(joined(render(VARIANTS[variant])))
    result = subprocess.run([str(BIN / "kubernetes-validate"), "--strict", "-k", kube_version, str(rendered)],
                            capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "ERROR" not in output
    for line in output.splitlines():
        if line.startswith("WARN"):
            assert any(f"kind {kind} " in line for kind in CRD_KINDS), f"unexpected warning: {line}"
    validated = output.count("passed for resource")
    kinds = [doc["kind"] for doc in yaml.safe_load_all(rendered.read_text()) if doc]
    assert validated == len([kind for kind in kinds if kind not in CRD_KINDS]), output


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_output_passes_yamllint(variant, tmp_path):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(joined(render(VARIANTS[variant])))
    result = subprocess.run([str(BIN / "yamllint"), "-s", "-d", YAMLLINT_CONFIG, str(rendered)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_custom_resources_carry_what_their_controllers_require():
    docs = manifests(VARIANTS["all-options"])
    kinds = by_kind(docs)
    target = workload(docs)
    (metrics_service,) = [s for s in kinds["Service"] if s["metadata"]["name"].endswith("-metrics")]

    (monitor,) = kinds["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= metrics_service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in metrics_service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics" and endpoint["interval"] == "15s"

    (scaled,) = kinds["ScaledObject"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": target["kind"],
                                                "name": target["metadata"]["name"]}
    assert scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"] == 12
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    (authentication,) = kinds["TriggerAuthentication"]
    assert authentication["apiVersion"] == "keda.sh/v1alpha1"
    assert trigger["authenticationRef"] == {"name": authentication["metadata"]["name"]}
    assert authentication["metadata"]["name"] == "notifications-kafka"
    # KEDA reads trigger metadata as strings only.
    assert all(isinstance(value, str) for value in trigger["metadata"].values()), trigger["metadata"]
    assert trigger["metadata"] == {
        "bootstrapServers": "b-1.kafka.internal:9096", "consumerGroup": "notifications", "topic": "notify.requests",
        "lagThreshold": "500", "activationLagThreshold": "5", "allowIdleConsumers": "false",
        # librdkafka's smallest is earliest.
        "offsetResetPolicy": "earliest", "limitToPartitionsWithLag": "true", "sasl": "scram_sha512", "tls": "enable"}


def test_keda_defaults_to_the_workers_brokers_group_and_topic():
    docs = manifests(with_values(MINIMAL, autoscaling__keda__enabled=True))
    (scaled,) = by_kind(docs)["ScaledObject"]
    metadata = scaled["spec"]["triggers"][0]["metadata"]
    assert (metadata["bootstrapServers"], metadata["consumerGroup"], metadata["topic"]) == (
        "kafka:9092", "apns-worker", "push.requests")
    assert "authenticationRef" not in scaled["spec"]["triggers"][0]


def keda_objects(values):
    kinds = by_kind(manifests(values))
    (scaled,) = kinds["ScaledObject"]
    (trigger,) = scaled["spec"]["triggers"]
    keda_configmaps = [c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("-keda")]
    return trigger, kinds.get("TriggerAuthentication", []), keda_configmaps


def test_keda_authenticates_with_the_workers_sasl_user_password_and_ca():
    # production-values.yaml: SASL_SSL, SCRAM-SHA-512, the user in properties, password and CA in kafkaSecret.
    trigger, (authentication,), (usernames,) = keda_objects(VARIANTS["production"])
    assert trigger["authenticationRef"] == {"name": authentication["metadata"]["name"]}
    assert authentication["metadata"]["name"] == "push-apns-worker-kafka"
    assert (trigger["metadata"]["sasl"], trigger["metadata"]["tls"]) == ("scram_sha512", "enable")
    refs = {ref["parameter"]: ref for ref in authentication["spec"]["secretTargetRef"]}
    assert refs == {"password": {"parameter": "password", "name": "apns-worker-kafka", "key": "sasl-password"},
                    "ca": {"parameter": "ca", "name": "apns-worker-kafka", "key": "ca.crt"}}
    # The keys are the files the worker reads, so KEDA and the worker use the same secrets.
    kafka = rendered_worker_config(VARIANTS["production"])["kafka"]
    assert kafka["property_files"]["sasl.password"] == "/etc/apns-worker/kafka/" + refs["password"]["key"]
    assert kafka["properties"]["ssl.ca.location"] == "/etc/apns-worker/kafka/" + refs["ca"]["key"]
    (username,) = authentication["spec"]["configMapTargetRef"]
    assert username == {"parameter": "username", "name": usernames["metadata"]["name"], "key": "username"}
    assert usernames["data"] == {"username": kafka["properties"]["sasl.username"]} == {"username": "apns-worker"}


def test_keda_takes_a_sasl_user_from_the_kafka_secret_and_a_client_key():
    values = copy.deepcopy(VARIANTS["all-options"])
    kafka = values["config"]["kafka"]
    del kafka["properties"]["sasl.username"]
    kafka["property_files"]["sasl.username"] = "/etc/apns-worker/kafka/user"
    kafka["properties"]["sasl.mechanism"] = "PLAIN"
    trigger, (authentication,), keda_configmaps = keda_objects(values)
    assert keda_configmaps == [] and "configMapTargetRef" not in authentication["spec"]
    assert trigger["metadata"]["sasl"] == "plaintext"
    assert {ref["parameter"]: (ref["name"], ref["key"]) for ref in authentication["spec"]["secretTargetRef"]} == {
        "username": ("kafka-client", "user"), "password": ("kafka-client", "password"),
        "ca": ("kafka-client", "ca.crt"),
        "cert": ("kafka-client", "client.crt"), "key": ("kafka-client", "client.key"),
        "keyPassword": ("kafka-client", "client.key.password")}


def test_keda_uses_a_given_authentication_ref_instead_of_generating_one():
    trigger, authentications, keda_configmaps = keda_objects(
        with_values(VARIANTS["production"], autoscaling__keda__authenticationRef="kafka-trigger-auth"))
    assert trigger["authenticationRef"] == {"name": "kafka-trigger-auth"}
    assert authentications == [] and keda_configmaps == []
    # sasl and tls then come from that TriggerAuthentication, not from the trigger's metadata.
    assert "sasl" not in trigger["metadata"] and "tls" not in trigger["metadata"]
    # A mechanism the chart cannot express is no problem when the TriggerAuthentication is yours.
    values = with_values(VARIANTS["production"], autoscaling__keda__authenticationRef="kafka-trigger-auth")
    values["config"]["kafka"]["properties"]["sasl.mechanism"] = "GSSAPI"
    assert keda_objects(values)[0]["authenticationRef"] == {"name": "kafka-trigger-auth"}


def test_keda_over_tls_with_the_system_trust_store_needs_no_trigger_authentication():
    values = with_values(MINIMAL, autoscaling__keda__enabled=True)
    values["config"] = deep_merged(yaml.safe_load((CHART / "values.yaml").read_text())["config"], MINIMAL["config"])
    values["config"]["kafka"]["properties"] = {"security.protocol": "SSL", "ssl.ca.location": "probe"}
    trigger, authentications, keda_configmaps = keda_objects(values)
    assert trigger["metadata"]["tls"] == "enable" and "sasl" not in trigger["metadata"]
    assert "authenticationRef" not in trigger and authentications == [] and keda_configmaps == []


@pytest.mark.parametrize("properties, files, expected", [
    ({"sasl.mechanism": "GSSAPI"}, {}, "not GSSAPI"),
    ({"sasl.mechanism": "OAUTHBEARER"}, {}, "not OAUTHBEARER"),
    ({}, {"sasl.password": "/etc/kafka-password/password"}, "config.kafka.property_files[sasl.password] is "
                                                             "/etc/apns-worker/kafka-password/password"),
    ({"ssl.ca.location": "/etc/ssl/private-ca.crt"}, {}, "config.kafka.properties[ssl.ca.location] is "
                                                          "/etc/ssl/private-ca.crt, which KEDA cannot read"),
])
def test_keda_auth_the_chart_cannot_express_fails_pointing_at_authentication_ref(properties, files, expected):
    values = copy.deepcopy(VARIANTS["production"])
    values["config"]["kafka"]["properties"].update(properties)
    for name, path in files.items():
        values["config"]["kafka"]["property_files"][name] = path.replace("/etc/", "/etc/apns-worker/")
    message = render_error(values)
    assert expected in message and "give autoscaling.keda.authenticationRef" in message, message


def test_keda_auth_without_a_kafka_secret_fails():
    values = with_values(VARIANTS["production"], kafkaSecret__existingSecret="")
    assert "which KEDA cannot read" in render_error(values)


@pytest.mark.parametrize("reset, policy", [(None, "earliest"), ("latest", "latest"), ("largest", "latest"),
                                           ("beginning", "earliest")])
def test_keda_offset_reset_policy_follows_the_workers_auto_offset_reset(reset, policy):
    values = copy.deepcopy(VARIANTS["production"])
    if reset:
        values["config"]["kafka"]["properties"]["auto.offset.reset"] = reset
    assert keda_objects(values)[0]["metadata"]["offsetResetPolicy"] == policy


def test_keda_offset_reset_policy_fails_for_auto_offset_reset_error():
    values = copy.deepcopy(VARIANTS["production"])
    values["config"]["kafka"]["properties"]["auto.offset.reset"] = "error"
    assert "auto.offset.reset error; KEDA's offsetResetPolicy knows only earliest and latest" in render_error(values)


@pytest.mark.parametrize("limit", [True, False])
def test_keda_limits_replicas_to_partitions_with_lag_unless_told_not_to(limit):
    values = with_values(VARIANTS["production"], autoscaling__keda__limitToPartitionsWithLag=limit)
    metadata = keda_objects(values)[0]["metadata"]
    assert metadata["limitToPartitionsWithLag"] == str(limit).lower()
    # KEDA refuses limitToPartitionsWithLag with allowIdleConsumers, and needs the topic.
    assert metadata["allowIdleConsumers"] == "false" and metadata["topic"] == "push.requests"
    default = keda_objects(with_values(MINIMAL, autoscaling__keda__enabled=True))[0]["metadata"]
    assert default["limitToPartitionsWithLag"] == "true"


# ---------------------------------------------------------------------------------------------------
# What the defaults deploy

def test_defaults_deploy_a_hardened_worker_with_probes_and_mounted_secrets():
    docs = manifests()
    assert sorted(by_kind(docs)) == ["ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service",
                                     "ServiceAccount"]
    deployment = workload(docs)
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]
    assert container["args"] == ["--config", "/etc/apns-worker/config/worker.yaml"]
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    assert all(mounts[name]["readOnly"] for name in ("config", "rules", "credentials"))
    assert mounts["tmp"]["mountPath"] == "/tmp"
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["credentials"]["secret"] == {"secretName": "apns-worker-credentials", "defaultMode": 0o440}
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    assert all(c["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
               for c in pod["topologySpreadConstraints"])
    (pdb,) = by_kind(docs)["PodDisruptionBudget"]
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]


def test_grace_period_is_derived_from_the_drain_timeout():
    pod = workload(manifests(with_values(MINIMAL, drainTimeoutSeconds=50)))["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 65
    config = rendered_worker_config(with_values(MINIMAL, drainTimeoutSeconds=50))
    assert config["shutdown"] == {"drain_timeout": "50s"}


def test_grace_period_not_longer_than_the_drain_timeout_fails():
    message = render_error(with_values(MINIMAL, drainTimeoutSeconds=30, terminationGracePeriodSeconds=30))
    assert "terminationGracePeriodSeconds (30) must be longer than drainTimeoutSeconds (30)" in message


def test_both_hpa_and_keda_enabled_fails_with_a_clear_message():
    message = render_error(with_values(MINIMAL, autoscaling__hpa__enabled=True, autoscaling__keda__enabled=True))
    assert "autoscaling.hpa.enabled and autoscaling.keda.enabled are both true" in message
    assert "Enable only one" in message


@pytest.mark.parametrize("autoscaler", ["hpa", "keda"])
def test_an_autoscaler_owns_the_replica_count(autoscaler):
    docs = manifests(with_values(MINIMAL, **{f"autoscaling__{autoscaler}__enabled": True}))
    assert "replicas" not in workload(docs)["spec"]
    assert ("HorizontalPodAutoscaler" in by_kind(docs)) == (autoscaler == "hpa")
    assert ("ScaledObject" in by_kind(docs)) == (autoscaler == "keda")


@pytest.mark.parametrize("setting", [
    {"replicaCount": 13},
    {"autoscaling__keda__enabled": True, "autoscaling__keda__maxReplicas": 20},
    {"autoscaling__hpa__enabled": True, "autoscaling__hpa__maxReplicas": 16},
])
def test_more_replicas_than_partitions_fails(setting):
    message = render_error(with_values(deep_merged(MINIMAL, {"partitionCount": 12}), **setting))
    assert "is more than partitionCount (12)" in message and "sits idle" in message


@pytest.mark.parametrize("key", ["rules", "metrics", "shutdown"])
def test_config_keys_the_chart_owns_are_refused(key):
    values = copy.deepcopy(MINIMAL)
    values["config"][key] = {}
    assert f"config.{key} is set by the chart" in render_error(values)


def test_static_membership_gives_each_statefulset_pod_its_name_as_group_instance_id():
    docs = manifests(VARIANTS["production"])
    statefulset = workload(docs)
    assert statefulset["kind"] == "StatefulSet"
    assert statefulset["spec"]["serviceName"] == "push-apns-worker-headless"
    headless = [s for s in by_kind(docs)["Service"] if s["metadata"]["name"] == "push-apns-worker-headless"]
    assert headless and headless[0]["spec"]["clusterIP"] == "None"
    env = {e["name"]: e for e in statefulset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["APNS_WORKER_KAFKA__GROUP_INSTANCE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert "APNS_WORKER_KAFKA__GROUP_INSTANCE_ID" not in {
        e["name"] for e in workload(manifests())["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_kafka_secret_is_mounted_read_only_where_the_config_points():
    pod = workload(manifests(VARIANTS["production"]))["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["kafka-secret"] == {"name": "kafka-secret", "mountPath": "/etc/apns-worker/kafka", "readOnly": True}
    config = rendered_worker_config(VARIANTS["production"])
    assert config["kafka"]["property_files"]["sasl.password"].startswith("/etc/apns-worker/kafka/")


@pytest.mark.parametrize("mode", ["hpa", "keda"])
def test_max_replicas_up_to_the_partition_count_passes(mode):
    docs = manifests(with_values(deep_merged(MINIMAL, {"partitionCount": 12}), **{f"autoscaling__{mode}__enabled": True,
                                                            f"autoscaling__{mode}__maxReplicas": 12}))
    kinds = by_kind(docs)
    if mode == "hpa":
        assert kinds["HorizontalPodAutoscaler"][0]["spec"]["maxReplicas"] == 12
    else:
        assert kinds["ScaledObject"][0]["spec"]["maxReplicaCount"] == 12


def test_pod_conventions_are_off_by_default_and_rendered_when_set():
    pod = workload(manifests())["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert "envFrom" not in container and "priorityClassName" not in pod["spec"]
    assert {v["name"] for v in pod["spec"]["volumes"]} == {"config", "rules", "credentials", "tmp"}
    assert "initContainers" not in pod["spec"] and "lifecycle" not in container
    assert "annotations" not in workload(manifests())["metadata"]
    assert {m["name"] for m in container["volumeMounts"]} == {"config", "rules", "credentials", "tmp"}
    assert "NetworkPolicy" not in by_kind(manifests())

    values = VARIANTS["all-options"]
    pod = workload(manifests(values))["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["envFrom"] == values["envFrom"]
    assert {"name": "APNS_WORKER_LOG__LEVEL", "value": "debug"} in container["env"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["spool"] == {"name": "spool", "emptyDir": {"sizeLimit": "32Mi"}}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["spool"] == {"name": "spool", "mountPath": "/var/spool/apns-worker"}
    assert pod["spec"]["priorityClassName"] == "high-priority"
    annotations = pod["metadata"]["annotations"]
    assert annotations["team"] == "notifications" and "checksum/config" in annotations
    assert pod["metadata"]["labels"]["cost-center"] == "messaging"
    # Pod labels never reach the selector: changing them must not orphan the pods.
    assert "cost-center" not in workload(manifests(values))["spec"]["selector"]["matchLabels"]


def network_policy(values):
    (policy,) = by_kind(manifests(values))["NetworkPolicy"]
    return policy


def test_network_policy_allows_dns_kafka_apns_out_and_metrics_in():
    values = VARIANTS["all-options"]
    docs = manifests(values)
    policy = network_policy(values)
    target = workload(docs)
    assert policy["spec"]["podSelector"] == target["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    dns, kafka, apns, extra = policy["spec"]["egress"]
    assert dns == {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    # The brokers' port from config.kafka.brokers, then networkPolicy.kafka.extraPorts.
    assert kafka == {"ports": [{"port": 9096, "protocol": "TCP"}, {"port": 9094, "protocol": "TCP"}],
                     "to": values["networkPolicy"]["kafka"]["to"]}
    # 443 for the production endpoint, 2197 as config.apns.endpoints.sandbox says.
    assert apns == {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 2197, "protocol": "TCP"}],
                    "to": [{"ipBlock": {"cidr": "17.0.0.0/8"}}]}
    assert extra == values["networkPolicy"]["extraEgress"][0]
    metrics, extra_ingress = policy["spec"]["ingress"]
    (port,) = metrics["ports"]
    (container_port,) = target["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert port == {"port": container_port["name"], "protocol": "TCP"} and container_port["containerPort"] == 9191
    assert metrics["from"] == values["networkPolicy"]["metrics"]["from"]
    assert extra_ingress == values["networkPolicy"]["extraIngress"][0]


def test_network_policy_defaults_to_the_brokers_port_and_apns_443_from_anywhere():
    policy = network_policy(with_values(VARIANTS["production"], networkPolicy__enabled=True))
    dns, kafka, apns = policy["spec"]["egress"]
    assert kafka == {"ports": [{"port": 9093, "protocol": "TCP"}]}
    assert apns == {"ports": [{"port": 443, "protocol": "TCP"}]}
    (metrics,) = policy["spec"]["ingress"]
    assert metrics == {"ports": [{"port": "metrics", "protocol": "TCP"}]}


# ---------------------------------------------------------------------------------------------------
# The ConfigMap: worker.yaml and the rules, rolled on change

def configmaps(values):
    return {c["metadata"]["name"]: c for c in by_kind(manifests(values))["ConfigMap"]}


def rendered_configmap(values, suffix=""):
    """The worker.yaml ConfigMap (suffix ""), the rules' ("-rules") or the preflight hook's ("-preflight")."""
    (configmap,) = [c for name, c in configmaps(values).items()
                    if name.endswith("apns-worker" + suffix) or name == "notifications" + suffix]
    return configmap


def rendered_worker_config(values):
    return yaml.safe_load(rendered_configmap(values)["data"]["worker.yaml"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_worker_yaml_satisfies_the_config_schema(variant):
    config = rendered_worker_config(VARIANTS[variant])
    assert schema_errors("worker-config", config) == []
    port = workload(manifests(VARIANTS[variant]))["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert config["metrics"]["listen"] == f"0.0.0.0:{port['containerPort']}"
    assert config["rules"]["file"] == "/etc/apns-worker/rules/rules.yaml"


def test_rules_are_stored_verbatim():
    # A literal block keeps exactly one final newline ("clip"), as the rules file had.
    rules = values_file("production")["rules"]
    assert rendered_configmap(VARIANTS["production"], "-rules")["data"] == {"rules.yaml": rules}
    blank_lines_inside = values_file("all-options")["rules"]
    assert "\n\n" in blank_lines_inside
    assert rendered_configmap(VARIANTS["all-options"], "-rules")["data"]["rules.yaml"] == blank_lines_inside
    # worker.yaml's ConfigMap holds worker.yaml only: its hash is what rolls the pods.
    assert list(rendered_configmap(VARIANTS["production"])["data"]) == ["worker.yaml"]


def checksum(values):
    return workload(manifests(values))["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


def test_pods_roll_when_the_config_changes_and_not_when_the_rules_do():
    base = checksum(MINIMAL)
    assert checksum(with_values(MINIMAL, drainTimeoutSeconds=40)) != base
    assert checksum(with_values(MINIMAL, config__log__level="debug")) != base
    # The workers reload the rules themselves: a rules change must not restart them (and rebalance the group).
    other_rules = "version: 1\nrules:\n  - id: other\n    match: {}\n    skip: test\n"
    assert checksum(with_values(MINIMAL, rules=other_rules)) == base
    assert rendered_configmap(with_values(MINIMAL, rules=other_rules), "-rules")["data"]["rules.yaml"] == other_rules
    assert checksum(with_values(MINIMAL, replicaCount=5)) == base
    assert checksum(with_values(MINIMAL, podLabels={"team": "x"})) == base


def test_rules_are_mounted_as_a_directory_the_kubelet_updates():
    pod = workload(manifests())["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # A subPath mount never sees a ConfigMap update; a whole-ConfigMap directory does (the kubelet swaps ..data).
    assert all("subPath" not in mount for mount in container["volumeMounts"])
    assert mounts["rules"] == {"name": "rules", "mountPath": "/etc/apns-worker/rules", "readOnly": True}
    assert volumes["rules"]["configMap"] == {"name": "push-apns-worker-rules"}
    assert volumes["config"]["configMap"] == {"name": "push-apns-worker"}
    assert rendered_worker_config(MINIMAL)["rules"]["file"] == mounts["rules"]["mountPath"] + "/rules.yaml"


# ---------------------------------------------------------------------------------------------------
# values.schema.json

@pytest.mark.parametrize("values, expected", [
    ({"replicaCount": "three"}, "replicaCount"),
    ({"replicaCount": -1}, "replicaCount"),
    ({"workload": {"kind": "DaemonSet"}}, "kind"),
    ({"metrics": {"port": 80}}, "port"),
    ({"securityContext": {"readOnlyRootFilesystem": False}}, "readOnlyRootFilesystem"),
    ({"credentials": {"existingSecret": "Not_A_Name"}}, "existingSecret"),
    ({"image": {"repository": "x", "digest": "latest"}}, "digest"),
    ({"replicas": 3}, "replicas"),
    ({"autoscaling": {"keda": {"lagThreshold": 0}}}, "lagThreshold"),
    ({"autoscaling": {"keda": {"limitToPartitionsWithLag": "yes"}}}, "limitToPartitionsWithLag"),
    ({"networkPolicy": {"kafka": {"extraPorts": [70000]}}}, "extraPorts"),
    ({"networkPolicy": {"metrics": {"from": [{"cidr": "10.0.0.0/8"}]}}}, "from"),
    ({"extraVolumeMounts": [{"name": "spool"}]}, "mountPath"),
    ({"extraVolumes": [{"name": "Spool"}]}, "extraVolumes"),
    ({"envFrom": [{"secretRef": {}}]}, "envFrom"),
    ({"extraContainers": [{"name": "apns-worker"}]}, "extraContainers"),
    ({"initContainers": [{"image": "busybox"}]}, "name"),
    ({"commonLabels": {"team": 1}}, "commonLabels"),
    ({"lifecycle": {"preStop": {"sleep": {}}}}, "seconds"),
    ({"preflight": {"hook": {"enable": True}}}, "enable"),
    ({"topologySpreadConstraints": [{"topologyKey": "zone"}]}, "maxSkew"),
])
def test_values_schema_rejects_bad_values(values, expected):
    with helm.Chart.load(str(CHART)) as chart:
        with pytest.raises(helm.HelmValuesError) as raised:
            chart.render(values=deep_merged(MINIMAL, values), name="push", namespace="notify", is_install=True)
    assert expected in str(raised.value)


def test_values_schema_config_part_is_generated_from_the_worker_schema_and_current():
    # Fails when schemas/worker-config.schema.json changed and scripts/generate-values-schema.py was not rerun.
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate-values-schema.py"), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    schema = json.loads((CHART / "values.schema.json").read_text())
    worker = json.loads((ROOT / "schemas" / "worker-config.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False and config["required"] == worker["required"]
    assert set(config["properties"]) == set(worker["properties"])
    for section, definition in worker["properties"].items():
        if "properties" in definition:
            assert set(config["properties"][section]["properties"]) == set(definition["properties"]), section


def config_error(config):
    with helm.Chart.load(str(CHART)) as chart:
        with pytest.raises(helm.HelmValuesError) as raised:
            chart.render(values=deep_merged(MINIMAL, {"config": config}), name="push", namespace="notify",
                         is_install=True)
    return str(raised.value)


@pytest.mark.parametrize("config, where, what", [
    ({"kafka": {"gruop": "push"}}, "at '/config/kafka'", "additional properties 'gruop' not allowed"),
    ({"kafka": {"brokers": ["kafka"]}}, "at '/config/kafka/brokers/0'", "does not match pattern"),
    ({"kafka": {"topics": {"requets": "push.requests"}}}, "at '/config/kafka/topics'", "'requets' not allowed"),
    ({"retry": {"max_total_time": 30}}, "at '/config/retry/max_total_time'", "got number, want string"),
    ({"apns": {"request_timeout": "10 seconds"}}, "at '/config/apns/request_timeout'", "does not match pattern"),
    ({"apns": {"connections": 0}}, "at '/config/apns/connections'", "minimum"),
    ({"credentials": {"team-key": {"key_id": "ABC"}}}, "at '/config/credentials/team-key/key_id'",
     "does not match pattern"),
    ({"credentials": {"team-key": {"kid": "ABC123DEFG"}}}, "at '/config/credentials/team-key/kid'", "false schema"),
    ({"apps": {"com.example.app": {"credentail": "team-key"}}}, "at '/config/apps/com.example.app'",
     "'credentail' not allowed"),
    ({"log": {"level": "verbose"}}, "at '/config/log/level'", "value must be one of"),
    ({"logs": {"level": "info"}}, "at '/config'", "'logs' not allowed"),
    # Durations are strings with a unit in both schemas (the worker refuses a bare number too).
    ({"shutdown": {"drain_timeout": 30}}, "at '/config/shutdown/drain_timeout'", "got number, want string"),
])
def test_a_config_the_worker_would_refuse_fails_helm_install(config, where, what):
    message = config_error(config)
    assert where in message and what in message, message


def test_secrets_in_kafka_properties_fail_helm_install():
    assert "invalid propertyName 'sasl.password'" in config_error({"kafka": {"properties": {"sasl.password": "x"}}})


def test_your_credentials_and_apps_are_the_only_ones_in_worker_yaml():
    # Helm merges maps: an example credential in values.yaml would land beside yours, its key file missing.
    values = {"config": {"credentials": {"prod": {"type": "token", "key_id": "XYZ1234567", "team_id": "DEF123GHIJ",
                                                  "key_file": "/etc/apns-worker/credentials/AuthKey_XYZ1234567.p8"}},
                         "apps": {"com.example.shop": {"credential": "prod"}}}}
    config = rendered_worker_config(values)
    assert list(config["credentials"]) == ["prod"] and list(config["apps"]) == ["com.example.shop"]


@pytest.mark.parametrize("key", ["credentials", "apps"])
def test_an_install_without_credentials_or_apps_fails(key):
    values = copy.deepcopy(MINIMAL)
    del values["config"][key]
    with helm.Chart.load(str(CHART)) as chart:
        with pytest.raises(helm.HelmValuesError) as raised:
            chart.render(values=values, name="push", namespace="notify", is_install=True)
    assert f"at '/config/{key}': minProperties" in str(raised.value), str(raised.value)


@pytest.mark.parametrize("example", ["minimal", "production", "simulator"])
def test_the_worker_config_examples_pass_the_values_schema(example):
    config = yaml.safe_load((ROOT / "schemas" / "examples" / f"worker-config.{example}.yaml").read_text())
    for key in ("rules", "metrics", "shutdown"):  # the chart's own
        config.pop(key, None)
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(chart.merge_values({"config": config}))


@pytest.mark.parametrize("rules, expected", [
    ("version: 1\nrules: [\n", "rules is not a YAML mapping"),
    ("- just\n- a list\n", "rules is not a YAML mapping"),
])
def test_unparsable_rules_fail_helm_install(rules, expected):
    message = render_error(with_values(MINIMAL, rules=rules))
    assert expected in message and "apns-worker rules check" in message, message


# ---------------------------------------------------------------------------------------------------
# The preflight check: `apns-worker run --check` before anything is applied (hook) or in each pod (init container)

def preflight(values):
    kinds = by_kind(manifests(values))
    jobs = [job for job in kinds.get("Job", []) if job["metadata"]["name"].endswith("-preflight")]
    hook_configmaps = [c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("-preflight")]
    return jobs, hook_configmaps


@pytest.mark.parametrize("variant", ["minimal", "production", "all-options"])
def test_preflight_hook_checks_the_pods_exact_config_rules_secrets_and_environment(variant):
    values = VARIANTS[variant]
    (job,), (hook_configmap,) = preflight(values)
    for resource, weight in ((hook_configmap, "-10"), (job, "-5")):
        annotations = resource["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert annotations["helm.sh/hook-weight"] == weight  # the ConfigMap exists before the Job
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    pods_files = {**rendered_configmap(values)["data"], **rendered_configmap(values, "-rules")["data"]}
    assert hook_configmap["data"] == pods_files
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]
    target = workload(manifests(values))["spec"]["template"]
    (check,) = pod["spec"]["containers"]
    (worker,) = target["spec"]["containers"][:1]
    assert check["image"] == worker["image"]
    assert check["args"] == worker["args"] + ["--check"]
    assert check["env"] == worker["env"] and check.get("envFrom") == worker.get("envFrom")
    assert check["volumeMounts"] == worker["volumeMounts"] and check["securityContext"] == worker["securityContext"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    pod_volumes = {v["name"]: v for v in target["spec"]["volumes"]}
    assert volumes.keys() == pod_volumes.keys()
    for name in volumes.keys() - {"config", "rules"}:
        assert volumes[name] == pod_volumes[name]
    assert volumes["config"]["configMap"]["name"] == volumes["rules"]["configMap"]["name"] == \
        hook_configmap["metadata"]["name"]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"].get("imagePullSecrets") == target["spec"].get("imagePullSecrets")
    assert pod["spec"].get("tolerations") == target["spec"].get("tolerations")
    # The metrics Service, the PodDisruptionBudget and the spread constraints must not count the check's pod.
    selector = workload(manifests(values))["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= pod["metadata"]["labels"].items()


def test_preflight_hook_uses_an_existing_service_account_only():
    # At pre-install the chart's own ServiceAccount does not exist yet.
    (job,), _ = preflight(MINIMAL)
    assert "serviceAccountName" not in job["spec"]["template"]["spec"]
    (job,), _ = preflight(with_values(MINIMAL, serviceAccount={"create": False, "name": "shared-worker"}))
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "shared-worker"


def test_preflight_hook_can_be_turned_off_and_the_init_container_on():
    values = with_values(MINIMAL, preflight={"hook": {"enabled": False}, "initContainer": {"enabled": True}})
    assert preflight(values) == ([], [])
    pod = workload(manifests(values))["spec"]["template"]["spec"]
    (check,) = pod["initContainers"]
    (worker,) = pod["containers"]
    assert check["name"] == "check" and check["args"] == worker["args"] + ["--check"]
    assert check["volumeMounts"] == worker["volumeMounts"] and check["env"] == worker["env"]
    assert "ports" not in check and "readinessProbe" not in check


def _materialize(configmap, directory, mount):
    """Writes a ConfigMap's files as the kubelet would, with /etc/apns-worker/ paths moved under `directory`."""
    target = directory / mount.removeprefix("/")
    target.mkdir(parents=True, exist_ok=True)
    for key, text in configmap["data"].items():
        (target / key).write_text(text.replace("/etc/apns-worker/", f"{directory}/etc/apns-worker/"))


@pytest.mark.parametrize("rules, passes", [
    (None, True),
    # Valid YAML, so it passes helm template; the worker's compiler refuses it, so the hook fails the release.
    ("version: 1\nrules:\n  - id: broken\n    match: {}\n    alert:\n      body: \"{{ event.data.text \"\n", False),
    ("version: 1\nrules:\n  - id: typo\n    mach: {}\n    alert: {body: x}\n", False),
])
def test_preflight_command_passes_good_values_and_fails_bad_rules_with_the_real_binary(rules, passes, tmp_path):
    binary = os.environ.get("APNS_WORKER_BIN")
    if not binary:
        pytest.skip("APNS_WORKER_BIN is not set (scripts/test.sh sets it to the release build)")
    values = copy.deepcopy(VARIANTS["production"])
    if rules:
        values["rules"] = rules
    (job,), (hook_configmap,) = preflight(values)
    (check,) = job["spec"]["template"]["spec"]["containers"]
    for mount in check["volumeMounts"]:
        if mount["name"] in ("config", "rules"):
            _materialize(hook_configmap, tmp_path, mount["mountPath"])
    # The Secrets the values name: an APNs key and Kafka's password and CA.
    credentials = tmp_path / "etc/apns-worker/credentials"
    credentials.mkdir(parents=True)
    key = subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
                         capture_output=True, check=True, timeout=30).stdout
    (credentials / "AuthKey_ABC123DEFG.p8").write_bytes(key)
    kafka = tmp_path / "etc/apns-worker/kafka"
    kafka.mkdir(parents=True)
    (kafka / "sasl-password").write_text("not-a-real-password\n")
    (kafka / "ca.crt").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text())
    environment = {name: value for name, value in os.environ.items() if not name.startswith("APNS_WORKER_")}
    environment.update({"POD_NAME": "push-apns-worker-preflight-x", "POD_NAMESPACE": "notify",
                        "APNS_WORKER_KAFKA__GROUP_INSTANCE_ID": "push-apns-worker-preflight-x"})
    arguments = [a.replace("/etc/apns-worker/", f"{tmp_path}/etc/apns-worker/") for a in check["args"]]
    result = subprocess.run([binary, "run", *arguments], capture_output=True, text=True, timeout=60, env=environment)
    output = result.stdout + result.stderr
    if passes:
        assert result.returncode == 0, output
        assert "configuration, rules and credentials are valid" in output
    else:
        assert result.returncode != 0, output
        # The rules' problems, each at its file:line:column on stderr, and why the check failed.
        assert re.search(r"/etc/apns-worker/rules/rules\.yaml:\d+:\d+: rule '(broken|typo)'", result.stderr), output
        assert "the worker does not start" in result.stderr, output


# ---------------------------------------------------------------------------------------------------
# The conventions of application charts

def test_common_labels_and_annotations_reach_every_resource_but_never_a_selector():
    values = VARIANTS["all-options"]
    docs = manifests(values)
    assert len(docs) >= 12
    for doc in docs:
        metadata = doc["metadata"]
        assert values["commonLabels"].items() <= metadata["labels"].items(), doc["kind"]
        assert values["commonAnnotations"].items() <= metadata["annotations"].items(), doc["kind"]
    target = workload(docs)
    assert values["commonLabels"].items() <= target["spec"]["template"]["metadata"]["labels"].items()
    assert not set(values["commonLabels"]) & set(target["spec"]["selector"]["matchLabels"])
    # Resources' own annotations stay beside them.
    (metrics_service,) = [s for s in by_kind(docs)["Service"] if s["metadata"]["name"].endswith("-metrics")]
    assert metrics_service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    account = by_kind(docs)["ServiceAccount"][0]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


def test_init_containers_sidecars_and_lifecycle_render_as_given():
    values = VARIANTS["all-options"]
    pod = workload(manifests(values))["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["check"] + [c["name"] for c in values["initContainers"]]
    assert pod["initContainers"][1:] == values["initContainers"]
    assert [c["name"] for c in pod["containers"]] == ["apns-worker"] + [c["name"] for c in values["extraContainers"]]
    assert pod["containers"][1:] == values["extraContainers"]
    assert pod["containers"][0]["lifecycle"] == values["lifecycle"]


def test_a_pre_stop_sleep_lengthens_the_derived_grace_period():
    values = with_values(MINIMAL, drainTimeoutSeconds=30, lifecycle={"preStop": {"sleep": {"seconds": 5}}})
    assert workload(manifests(values))["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 50
    message = render_error(with_values(values, terminationGracePeriodSeconds=34))
    assert "must be longer than lifecycle.preStop.sleep.seconds (5) plus drainTimeoutSeconds (30)" in message


def test_scheduling_and_identity_options_render_as_given():
    values = VARIANTS["all-options"]
    pod = workload(manifests(values))["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == values["nodeSelector"] and pod["tolerations"] == values["tolerations"]
    assert pod["affinity"] == values["affinity"] and pod["imagePullSecrets"] == values["imagePullSecrets"]
    assert pod["serviceAccountName"] == values["serviceAccount"]["name"]
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"},
                                                 "limits": {"memory": "512Mi"}}
    custom = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "apns-worker"}}, "minDomains": 2}]
    pod = workload(manifests(with_values(MINIMAL, topologySpreadConstraints=custom)))["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"] == custom
    pod = workload(manifests(with_values(MINIMAL, topologySpread={"enabled": False})))["spec"]["template"]["spec"]
    assert "topologySpreadConstraints" not in pod
    pod = workload(manifests(with_values(MINIMAL, serviceAccount={"create": False, "name": ""})))["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "default"
    assert "ServiceAccount" not in by_kind(manifests(with_values(MINIMAL, serviceAccount={"create": False})))


def test_notes_explain_how_to_check_the_release():
    notes = render(VARIANTS["production"])["apns-worker/templates/NOTES.txt"]
    assert "svc/push-apns-worker-metrics 9090" in notes and "/readyz" in notes
    assert "KEDA scales between 3 and 24 replicas" in notes
    assert ("the TriggerAuthentication push-apns-worker-kafka, made from config.kafka and the Secret apns-worker-kafka"
            in notes)
    assert "get scaledobject push-apns-worker" in notes
    assert "logs job/push-apns-worker-preflight" in notes and "push-apns-worker-rules" in notes
    deployment = render(with_values(MINIMAL, staticMembership={"enabled": True}))
    deployment_notes = deployment["apns-worker/templates/NOTES.txt"]
    assert "set workload.kind=StatefulSet" in deployment_notes


# ---------------------------------------------------------------------------------------------------
# The image the chart deploys (image/Dockerfile; no Docker engine here, so its contract is checked)

DOCKERFILE = ROOT / "image" / "Dockerfile"


def runtime_stage():
    text = DOCKERFILE.read_text()
    return text[text.rindex("\nFROM "):]


def runtime_packages():
    stage = runtime_stage().replace("\\\n", " ")
    (install,) = [line for line in stage.splitlines() if "apt-get install" in line]
    words = install.split("apt-get install", 1)[1].split("&&", 1)[0].split()
    return {word for word in words if not word.startswith("-")}


def test_image_runs_as_the_non_root_user_the_chart_expects():
    stage = runtime_stage()
    run_as = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    assert f"USER {run_as['runAsUser']}:{run_as['runAsGroup']}" in stage
    assert f"--uid {run_as['runAsUser']}" in stage and f"--gid {run_as['runAsGroup']}" in stage
    assert 'ENTRYPOINT ["/usr/local/bin/apns-worker", "run"]' in stage
    assert "FROM ${SWIFT_IMAGE} AS build" in DOCKERFILE.read_text()
    assert "ARG SWIFT_IMAGE=swift:6.3-bookworm" in DOCKERFILE.read_text()
    assert "ARG RUNTIME_IMAGE=debian:bookworm-slim" in DOCKERFILE.read_text()


def _package_of(library):
    """The Debian package that ships a shared library, found through ldconfig and dpkg."""
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    paths = [line.split("=>")[1].strip() for line in listing.splitlines()
             if line.strip().startswith(library + " ") and "x86-64" in line]
    assert paths, f"{library} not found by ldconfig"
    for path in paths + [str(Path(paths[0]).resolve())]:
        for candidate in {path, path.removeprefix("/usr"), "/usr" + path}:
            found = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if found.returncode == 0:
                return found.stdout.split(":")[0]
    raise AssertionError(f"no package owns {library}")


def test_image_installs_exactly_the_libraries_the_binary_links():
    binary = os.environ.get("APNS_WORKER_BIN")
    if not binary:
        pytest.skip("APNS_WORKER_BIN is not set (scripts/test.sh sets it to the release build)")
    dynamic = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    # The image links the Swift runtime and Foundation statically (--static-swift-stdlib).
    swift_runtime = ("libswift", "libFoundation", "libdispatch", "libBlocksRuntime")
    system = [library for library in needed if not library.startswith(swift_runtime)]
    packages = {_package_of(library) for library in system}
    base_image = {"libc6", "libgcc-s1", "libstdc++6"}
    installed = runtime_packages()
    assert packages - base_image <= installed, f"the image lacks {packages - base_image - installed}"
    # Nothing beyond what is linked, the trust store, and the static Swift runtime's C++ library.
    assert installed - packages - {"ca-certificates", "libstdc++6"} == set(), installed - packages


# ---------------------------------------------------------------------------------------------------
# A rules change reaches a running worker the way the kubelet delivers it (real binary, mock Kafka, simulator)

class ConfigMapVolume:
    """A directory laid out as the kubelet's atomic writer does for a ConfigMap volume: the files live in a
    timestamped directory, `..data` links to it, and each key is a link through `..data`. An update writes a new
    timestamped directory, renames a fresh `..data_tmp` link over `..data` (one atomic step) and removes the old
    directory: a watcher that kept the old file open, or resolved the links once, would never see it."""

    def __init__(self, directory, data):
        self.directory = directory
        self.version = 0
        self.update(data)
        for key in data:
            (directory / key).symlink_to(Path("..data") / key)

    def update(self, data):
        self.version += 1
        previous = (self.directory / "..data").resolve() if (self.directory / "..data").exists() else None
        payload = self.directory / f"..2026_12_02_00_00_{self.version:02d}.000000001"
        payload.mkdir(parents=True)
        for key, text in data.items():
            (payload / key).write_text(text)
        temporary = self.directory / "..data_tmp"
        temporary.symlink_to(payload.name)
        os.rename(temporary, self.directory / "..data")
        if previous:
            for file in previous.iterdir():
                file.unlink()
            previous.rmdir()


def test_a_rules_change_reaches_the_running_worker_without_a_restart(tmp_path):
    if not os.environ.get("APNS_WORKER_BIN"):
        pytest.skip("APNS_WORKER_BIN is not set (scripts/test.sh sets it to the release build)")
    import worker_process_support as support

    first = support.RULES
    second = support.RULES.replace("id: all", "id: reloaded")
    broken = second.replace('body: "{{ event.type }}"', 'body: "{{ event.type "')
    renders = {name: with_values(MINIMAL, rules=rules) for name, rules in
               (("first", first), ("second", second), ("broken", broken))}
    # The chart's part: the three versions differ only in the rules ConfigMap, so no pod is rolled.
    assert len({checksum(values) for values in renders.values()}) == 1
    data = {name: rendered_configmap(values, "-rules")["data"] for name, values in renders.items()}

    mount = tmp_path / "etc-apns-worker-rules"
    volume = ConfigMapVolume(mount, data["first"])
    stack = support.Stack(str(tmp_path), "chart-rules-reload", latency_ms="1", max_in_flight=100, drain_timeout=5,
                          overrides={"rules": {"file": str(mount / "rules.yaml")}})
    try:
        worker = stack.start_worker("worker")

        def outcome_rules(events):
            stack.produce(events)
            wanted = {(e["id"], d["token"]) for e in events for d in e["devices"]}
            stack.reader.wait_for(lambda: wanted <= set(stack.reader.per_pair), 60, "outcomes of the events")
            return {o["rule_id"] for o in stack.reader.outcomes if (o["event_id"], o["device_token"]) in wanted}

        assert outcome_rules(support.make_events(2, "before")) == {"all"}
        volume.update(data["second"])
        reloaded = worker.wait_for_log("rules reloaded", 60)
        assert reloaded["fields"]["summary"].startswith(str(mount / "rules.yaml"))
        assert outcome_rules(support.make_events(2, "after")) == {"reloaded"}
        # A broken version is refused and the rules in force stay.
        volume.update(data["broken"])
        worker.wait_for_log("the changed rules file has problems; keeping the rules in use", 60)
        assert outcome_rules(support.make_events(2, "broken")) == {"reloaded"}
        status, metrics = support.http_get(worker.metrics_url() + "/metrics")
        assert status == 200
        reloads = support.metric_series(metrics, "apns_worker_rules_reloads_total")
        assert (reloads['result="success"'], reloads['result="failure"']) == (1, 1), reloads
        assert worker.process.poll() is None and len(worker.find("worker started")) == 1
    finally:
        stack.close()


def test_the_default_image_tag_is_the_version_the_binary_reports():
    """The chart's appVersion names the image it deploys by default; it must be the worker's own version
    (`apns-worker --version`, WorkerVersion.current), or an install pulls an image of another release."""
    binary = os.environ.get("APNS_WORKER_BIN", "apns-worker")
    reported = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.split()[-1]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == reported
    images = [container["image"] for document in manifests() if document.get("kind") == "Deployment"
              for container in document["spec"]["template"]["spec"]["containers"]]
    assert images and all(image == f"ghcr.io/example/apns-worker:{reported}" for image in images), images
