//! Column definitions of the tables kube-apiserver 1.36 serves, as registered by
//! pkg/printers/internalversion/printers.go `AddHandlers`, and for custom resources by
//! apiextensions-apiserver's `serveDefaultColumnsIfEmpty` + tableconvertor.
//!
//! Descriptions are the generated swagger docs the printers reference
//! (k8s.io/api/core/v1, discovery/v1beta1, apps/v1, apimachinery meta/v1 `SwaggerDoc()`), copied
//! verbatim: this file is generated data and exempt from the size rule.

/// One `metav1.TableColumnDefinition`.
pub(super) struct Column {
    pub name: &'static str,
    /// OpenAPI type: "string", "integer", "date", ...
    pub kind: &'static str,
    pub format: &'static str,
    pub description: &'static str,
    pub priority: i32,
}

const fn col(name: &'static str, description: &'static str) -> Column {
    Column { name, kind: "string", format: "", description, priority: 0 }
}

/// A wide-only column (`Priority: 1`).
const fn wide(name: &'static str, description: &'static str) -> Column {
    Column { name, kind: "string", format: "", description, priority: 1 }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    description: OBJECT_META_NAME,
    priority: 0,
};
const AGE: Column = col("Age", OBJECT_META_CREATION_TIMESTAMP);

pub(super) const CONFIG_MAP: &[Column] = &[NAME, col("Data", CONFIG_MAP_DATA), AGE];

pub(super) const POD: &[Column] = &[
    NAME,
    col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    col("Status", "The aggregate status of the containers in this pod."),
    col(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    wide("IP", POD_STATUS_POD_IP),
    wide("Node", POD_SPEC_NODE_NAME),
    wide("Nominated Node", POD_STATUS_NOMINATED_NODE_NAME),
    wide("Readiness Gates", POD_SPEC_READINESS_GATES),
];

pub(super) const SECRET: &[Column] =
    &[NAME, col("Type", SECRET_TYPE), col("Data", SECRET_DATA), AGE];

pub(super) const SERVICE: &[Column] = &[
    NAME,
    col("Type", SERVICE_SPEC_TYPE),
    col("Cluster-IP", SERVICE_SPEC_CLUSTER_IP),
    col("External-IP", SERVICE_SPEC_EXTERNAL_IPS),
    col("Port(s)", SERVICE_SPEC_PORTS),
    AGE,
    wide("Selector", SERVICE_SPEC_SELECTOR),
];

pub(super) const NAMESPACE: &[Column] = &[NAME, col("Status", "The status of the namespace"), AGE];

pub(super) const NODE: &[Column] = &[
    NAME,
    col("Status", "The status of the node"),
    col("Roles", "The roles of the node"),
    AGE,
    col("Version", NODE_SYSTEM_INFO_KUBELET_VERSION),
    wide("Internal-IP", NODE_STATUS_ADDRESSES),
    wide("External-IP", NODE_STATUS_ADDRESSES),
    wide("OS-Image", NODE_SYSTEM_INFO_OS_IMAGE),
    wide("Kernel-Version", NODE_SYSTEM_INFO_KERNEL_VERSION),
    wide("Container-Runtime", NODE_SYSTEM_INFO_CONTAINER_RUNTIME_VERSION),
];

pub(super) const EVENT: &[Column] = &[
    col("Last Seen", EVENT_LAST_TIMESTAMP),
    col("Type", EVENT_TYPE),
    col("Reason", EVENT_REASON),
    col("Object", EVENT_INVOLVED_OBJECT),
    wide("Subobject", OBJECT_REFERENCE_FIELD_PATH),
    wide("Source", EVENT_SOURCE),
    col("Message", EVENT_MESSAGE),
    wide("First Seen", EVENT_FIRST_TIMESTAMP),
    wide("Count", EVENT_COUNT),
    Column {
        name: "Name",
        kind: "string",
        format: "name",
        description: OBJECT_META_NAME,
        priority: 1,
    },
];

pub(super) const ENDPOINTS: &[Column] = &[NAME, col("Endpoints", ENDPOINTS_SUBSETS), AGE];

pub(super) const ENDPOINT_SLICE: &[Column] = &[
    NAME,
    col("AddressType", ENDPOINT_SLICE_ADDRESS_TYPE),
    col("Ports", ENDPOINT_SLICE_PORTS),
    col("Endpoints", ENDPOINT_SLICE_ENDPOINTS),
    AGE,
];

/// A column of `Type: "integer"`.
const fn int(name: &'static str, description: &'static str) -> Column {
    Column { name, kind: "integer", format: "", description, priority: 0 }
}

const TEMPLATE_CONTAINERS: Column = wide("Containers", "Names of each container in the template.");
const TEMPLATE_IMAGES: Column =
    wide("Images", "Images referenced by each container in the template.");

pub(super) const DEPLOYMENT: &[Column] = &[
    NAME,
    col("Ready", "Number of the pod with ready state"),
    col("Up-to-date", DEPLOYMENT_STATUS_UPDATED_REPLICAS),
    col("Available", DEPLOYMENT_STATUS_AVAILABLE_REPLICAS),
    AGE,
    TEMPLATE_CONTAINERS,
    TEMPLATE_IMAGES,
    wide("Selector", DEPLOYMENT_SPEC_SELECTOR),
];

pub(super) const REPLICA_SET: &[Column] = &[
    NAME,
    int("Desired", REPLICA_SET_SPEC_REPLICAS),
    int("Current", REPLICA_SET_STATUS_REPLICAS),
    int("Ready", REPLICA_SET_STATUS_READY_REPLICAS),
    AGE,
    TEMPLATE_CONTAINERS,
    TEMPLATE_IMAGES,
    wide("Selector", REPLICA_SET_SPEC_SELECTOR),
];

/// A custom resource whose CRD version declares no additionalPrinterColumns.
pub(super) const CUSTOM: &[Column] = &[
    NAME,
    Column {
        name: "Age",
        kind: "date",
        format: "",
        description: OBJECT_META_CREATION_TIMESTAMP,
        priority: 0,
    },
];

const OBJECT_META_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const OBJECT_META_CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const POD_STATUS_POD_IP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const POD_SPEC_NODE_NAME: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
const POD_STATUS_NOMINATED_NODE_NAME: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const POD_SPEC_READINESS_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
const CONFIG_MAP_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const SERVICE_SPEC_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const SERVICE_SPEC_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_SPEC_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const SERVICE_SPEC_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_SPEC_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";
const ENDPOINTS_SUBSETS: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";
const NODE_SYSTEM_INFO_KUBELET_VERSION: &str = "Kubelet Version reported by the node.";
const NODE_STATUS_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const NODE_SYSTEM_INFO_OS_IMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
const NODE_SYSTEM_INFO_KERNEL_VERSION: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
const NODE_SYSTEM_INFO_CONTAINER_RUNTIME_VERSION: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";
const EVENT_LAST_TIMESTAMP: &str =
    "The time at which the most recent occurrence of this event was recorded.";
const EVENT_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
const EVENT_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
const EVENT_INVOLVED_OBJECT: &str = "The object that this event is about.";
const OBJECT_REFERENCE_FIELD_PATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
const EVENT_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
const EVENT_MESSAGE: &str = "A human-readable description of the status of this operation.";
const EVENT_FIRST_TIMESTAMP: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
const EVENT_COUNT: &str = "The number of times this event has occurred.";
const ENDPOINT_SLICE_ADDRESS_TYPE: &str = "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.";
const ENDPOINT_SLICE_PORTS: &str = "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.";
const ENDPOINT_SLICE_ENDPOINTS: &str = "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.";
const DEPLOYMENT_STATUS_UPDATED_REPLICAS: &str = "Total number of non-terminating pods targeted by this deployment that have the desired template spec.";
const DEPLOYMENT_STATUS_AVAILABLE_REPLICAS: &str = "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.";
const DEPLOYMENT_SPEC_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.";
const REPLICA_SET_SPEC_REPLICAS: &str = "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const REPLICA_SET_STATUS_REPLICAS: &str = "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const REPLICA_SET_STATUS_READY_REPLICAS: &str =
    "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.";
const REPLICA_SET_SPEC_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
