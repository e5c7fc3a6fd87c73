"""Koordinator's label/annotation vocabulary and the QoS-class / priority-class model.

Everything here is a pure function over plain values (a labels mapping, a priority ``int``, a k8s QoS class
string), so both binaries can use it without agreeing on a pod type.
"""

from apis.extension.constants import (
    ANNOTATION_NODE_RESERVATION,
    DOMAIN_PREFIX,
    LABEL_POD_PRIORITY,
    LABEL_POD_PRIORITY_CLASS,
    LABEL_POD_QOS,
    NODE_DOMAIN_PREFIX,
    RESOURCE_BATCH_CPU,
    RESOURCE_BATCH_MEMORY,
    RESOURCE_MID_CPU,
    RESOURCE_MID_MEMORY,
)
from apis.extension.priority import (
    PRIORITY_RANGES,
    PriorityClass,
    PriorityRange,
    default_priority_class_for_qos,
    priority_class_by_value,
    priority_class_with_default,
    resource_name_for,
)
from apis.extension.qos import (
    KubeQOSClass,
    QoSClass,
    kube_qos_class,
    qos_class_by_name,
    qos_class_for_kube_qos,
    qos_class_with_default,
)

__all__ = [
    "ANNOTATION_NODE_RESERVATION",
    "DOMAIN_PREFIX",
    "LABEL_POD_PRIORITY",
    "LABEL_POD_PRIORITY_CLASS",
    "LABEL_POD_QOS",
    "NODE_DOMAIN_PREFIX",
    "PRIORITY_RANGES",
    "RESOURCE_BATCH_CPU",
    "RESOURCE_BATCH_MEMORY",
    "RESOURCE_MID_CPU",
    "RESOURCE_MID_MEMORY",
    "KubeQOSClass",
    "PriorityClass",
    "PriorityRange",
    "QoSClass",
    "default_priority_class_for_qos",
    "kube_qos_class",
    "priority_class_by_value",
    "priority_class_with_default",
    "qos_class_by_name",
    "qos_class_for_kube_qos",
    "qos_class_with_default",
    "resource_name_for",
]
