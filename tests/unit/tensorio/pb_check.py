"""Protobuf cross-check helper, run by ``test_protobuf_compat.py`` under ``$MURPHY_PB_PYTHON``.

It needs only ``google.protobuf`` (any version from 3.20 on) and never imports murphy. The
messages are built at runtime from ``descriptor_pb2`` with smdebug's field numbers (package
``smdebug``; ``SummaryMetadata.plugin_data`` repeated, as in smdebug's vendored protos), so no
``.proto`` compile step is needed. Nested messages are declared top-level: same wire format.

stdin: ``{"decode": [hex payload, ...], "encode": [event spec, ...]}``
stdout: ``{"decoded": [...], "encoded": [hex payload, ...], "protobuf": version}``
"""

from __future__ import annotations

import json
import sys
from typing import Any

from google.protobuf import __version__ as pb_version  # type: ignore[import-untyped,unused-ignore]
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped,unused-ignore]

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "int32": F.TYPE_INT32,
    "uint32": F.TYPE_UINT32, "uint64": F.TYPE_UINT64, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
}  # fmt: skip

MESSAGES: dict[str, list[tuple[str, int, str, bool]]] = {
    "Dim": [("size", 1, "int64", False), ("name", 2, "string", False)],
    "TensorShapeProto": [("dim", 2, "Dim", True), ("unknown_rank", 3, "bool", False)],
    "TensorProto": [
        ("dtype", 1, "int32", False), ("tensor_shape", 2, "TensorShapeProto", False),
        ("version_number", 3, "int32", False), ("tensor_content", 4, "bytes", False),
        ("float_val", 5, "float", True), ("double_val", 6, "double", True),
        ("int_val", 7, "int32", True), ("string_val", 8, "bytes", True),
        ("scomplex_val", 9, "float", True), ("int64_val", 10, "int64", True),
        ("bool_val", 11, "bool", True), ("dcomplex_val", 12, "double", True),
        ("half_val", 13, "int32", True), ("uint32_val", 16, "uint32", True),
        ("uint64_val", 17, "uint64", True),
    ],
    "PluginData": [("plugin_name", 1, "string", False), ("content", 2, "string", False)],
    "SummaryMetadata": [("plugin_data", 1, "PluginData", True)],
    "Value": [
        ("tag", 1, "string", False), ("simple_value", 2, "float", False),
        ("node_name", 7, "string", False), ("tensor", 8, "TensorProto", False),
        ("metadata", 9, "SummaryMetadata", False),
    ],
    "Summary": [("value", 1, "Value", True)],
    "Event": [
        ("wall_time", 1, "double", False), ("step", 2, "int64", False),
        ("file_version", 3, "string", False), ("summary", 5, "Summary", False),
    ],
}  # fmt: skip


def build_classes() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(name="murphy_pb_check.proto", package="smdebug", syntax="proto3")
    for msg_name, fields in MESSAGES.items():
        msg = fdp.message_type.add(name=msg_name)
        for name, number, typ, repeated in fields:
            f = msg.field.add(name=name, number=number)
            f.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
            if typ in SCALARS:
                f.type = SCALARS[typ]
            else:
                f.type = F.TYPE_MESSAGE
                f.type_name = f".smdebug.{typ}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    out = {}
    for msg_name in MESSAGES:
        desc = pool.FindMessageTypeByName(f"smdebug.{msg_name}")
        get = getattr(message_factory, "GetMessageClass", None)
        out[msg_name] = get(desc) if get else message_factory.MessageFactory(pool).GetPrototype(desc)
    return out


def decode(cls: dict[str, Any], hexdata: str) -> dict[str, Any]:
    ev = cls["Event"]()
    ev.ParseFromString(bytes.fromhex(hexdata))
    values = []
    for v in ev.summary.value:
        t = v.tensor
        values.append(
            {
                "tag": v.tag,
                "plugins": [[p.plugin_name, p.content] for p in v.metadata.plugin_data],
                "dtype": t.dtype,
                "has_shape": v.tensor.HasField("tensor_shape"),
                "shape": [[d.size, d.name] for d in t.tensor_shape.dim],
                "content": t.tensor_content.hex(),
                "string_val": [s.hex() for s in t.string_val],
            }
        )
    return {"wall_time": ev.wall_time, "step": ev.step, "values": values}


def encode(cls: dict[str, Any], spec: dict[str, Any]) -> str:
    ev = cls["Event"](wall_time=spec.get("wall_time", 0.0), step=spec.get("step", 0))
    value = ev.summary.value.add(tag=spec["tag"])
    for name, content in spec.get("plugins", []):
        value.metadata.plugin_data.add(plugin_name=name, content=content)
    tensor = value.tensor
    tensor.SetInParent()
    for size in spec.get("shape", []):
        tensor.tensor_shape.dim.add(size=size)
    for key, val in spec.get("tensor", {}).items():
        if key == "tensor_content":
            tensor.tensor_content = bytes.fromhex(val)
        elif key == "string_val":
            tensor.string_val.extend(bytes.fromhex(s) for s in val)
        elif isinstance(val, list):
            getattr(tensor, key).extend(val)
        else:
            setattr(tensor, key, val)
    return str(ev.SerializeToString().hex())


def main() -> None:
    request = json.load(sys.stdin)
    cls = build_classes()
    json.dump(
        {
            "protobuf": pb_version,
            "decoded": [decode(cls, h) for h in request.get("decode", [])],
            "encoded": [encode(cls, s) for s in request.get("encode", [])],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
