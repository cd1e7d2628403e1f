from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompressionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[CompressionType]
    LZ4: _ClassVar[CompressionType]
    ZLIB: _ClassVar[CompressionType]
    ZSTD: _ClassVar[CompressionType]
    SNAPPY: _ClassVar[CompressionType]
NONE: CompressionType
LZ4: CompressionType
ZLIB: CompressionType
ZSTD: CompressionType
SNAPPY: CompressionType

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class OffloadDriverMetadata(_message.Message):
    __slots__ = ("name", "properties")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, name: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class OffloadSegment(_message.Message):
    __slots__ = ("uidMsb", "uidLsb", "complete", "assignedTimestamp", "offloadedTimestamp", "endEntryId", "driverMetadata")
    UIDMSB_FIELD_NUMBER: _ClassVar[int]
    UIDLSB_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ASSIGNEDTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    OFFLOADEDTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ENDENTRYID_FIELD_NUMBER: _ClassVar[int]
    DRIVERMETADATA_FIELD_NUMBER: _ClassVar[int]
    uidMsb: int
    uidLsb: int
    complete: bool
    assignedTimestamp: int
    offloadedTimestamp: int
    endEntryId: int
    driverMetadata: OffloadDriverMetadata
    def __init__(self, uidMsb: _Optional[int] = ..., uidLsb: _Optional[int] = ..., complete: _Optional[bool] = ..., assignedTimestamp: _Optional[int] = ..., offloadedTimestamp: _Optional[int] = ..., endEntryId: _Optional[int] = ..., driverMetadata: _Optional[_Union[OffloadDriverMetadata, _Mapping]] = ...) -> None: ...

class OffloadContext(_message.Message):
    __slots__ = ("uidMsb", "uidLsb", "complete", "bookkeeperDeleted", "timestamp", "driverMetadata", "offloadSegment")
    UIDMSB_FIELD_NUMBER: _ClassVar[int]
    UIDLSB_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    BOOKKEEPERDELETED_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DRIVERMETADATA_FIELD_NUMBER: _ClassVar[int]
    OFFLOADSEGMENT_FIELD_NUMBER: _ClassVar[int]
    uidMsb: int
    uidLsb: int
    complete: bool
    bookkeeperDeleted: bool
    timestamp: int
    driverMetadata: OffloadDriverMetadata
    offloadSegment: _containers.RepeatedCompositeFieldContainer[OffloadSegment]
    def __init__(self, uidMsb: _Optional[int] = ..., uidLsb: _Optional[int] = ..., complete: _Optional[bool] = ..., bookkeeperDeleted: _Optional[bool] = ..., timestamp: _Optional[int] = ..., driverMetadata: _Optional[_Union[OffloadDriverMetadata, _Mapping]] = ..., offloadSegment: _Optional[_Iterable[_Union[OffloadSegment, _Mapping]]] = ...) -> None: ...

class NestedPositionInfo(_message.Message):
    __slots__ = ("ledgerId", "entryId")
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    entryId: int
    def __init__(self, ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ...) -> None: ...

class ManagedLedgerInfo(_message.Message):
    __slots__ = ("ledgerInfo", "terminatedPosition", "properties")
    class LedgerInfo(_message.Message):
        __slots__ = ("ledgerId", "entries", "size", "timestamp", "offloadContext")
        LEDGERID_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        SIZE_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        OFFLOADCONTEXT_FIELD_NUMBER: _ClassVar[int]
        ledgerId: int
        entries: int
        size: int
        timestamp: int
        offloadContext: OffloadContext
        def __init__(self, ledgerId: _Optional[int] = ..., entries: _Optional[int] = ..., size: _Optional[int] = ..., timestamp: _Optional[int] = ..., offloadContext: _Optional[_Union[OffloadContext, _Mapping]] = ...) -> None: ...
    LEDGERINFO_FIELD_NUMBER: _ClassVar[int]
    TERMINATEDPOSITION_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    ledgerInfo: _containers.RepeatedCompositeFieldContainer[ManagedLedgerInfo.LedgerInfo]
    terminatedPosition: NestedPositionInfo
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, ledgerInfo: _Optional[_Iterable[_Union[ManagedLedgerInfo.LedgerInfo, _Mapping]]] = ..., terminatedPosition: _Optional[_Union[NestedPositionInfo, _Mapping]] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class MessageRange(_message.Message):
    __slots__ = ("lowerEndpoint", "upperEndpoint")
    LOWERENDPOINT_FIELD_NUMBER: _ClassVar[int]
    UPPERENDPOINT_FIELD_NUMBER: _ClassVar[int]
    lowerEndpoint: NestedPositionInfo
    upperEndpoint: NestedPositionInfo
    def __init__(self, lowerEndpoint: _Optional[_Union[NestedPositionInfo, _Mapping]] = ..., upperEndpoint: _Optional[_Union[NestedPositionInfo, _Mapping]] = ...) -> None: ...

class LongProperty(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class StringProperty(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class LongListMap(_message.Message):
    __slots__ = ("key", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: int
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, key: _Optional[int] = ..., values: _Optional[_Iterable[int]] = ...) -> None: ...

class BatchedEntryDeletionIndexInfo(_message.Message):
    __slots__ = ("position", "deleteSet")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DELETESET_FIELD_NUMBER: _ClassVar[int]
    position: NestedPositionInfo
    deleteSet: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, position: _Optional[_Union[NestedPositionInfo, _Mapping]] = ..., deleteSet: _Optional[_Iterable[int]] = ...) -> None: ...

class PositionInfo(_message.Message):
    __slots__ = ("ledgerId", "entryId", "individualDeletedMessages", "properties", "batchedEntryDeletionIndexInfo", "individualDeletedMessageRanges")
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    INDIVIDUALDELETEDMESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BATCHEDENTRYDELETIONINDEXINFO_FIELD_NUMBER: _ClassVar[int]
    INDIVIDUALDELETEDMESSAGERANGES_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    entryId: int
    individualDeletedMessages: _containers.RepeatedCompositeFieldContainer[MessageRange]
    properties: _containers.RepeatedCompositeFieldContainer[LongProperty]
    batchedEntryDeletionIndexInfo: _containers.RepeatedCompositeFieldContainer[BatchedEntryDeletionIndexInfo]
    individualDeletedMessageRanges: _containers.RepeatedCompositeFieldContainer[LongListMap]
    def __init__(self, ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ..., individualDeletedMessages: _Optional[_Iterable[_Union[MessageRange, _Mapping]]] = ..., properties: _Optional[_Iterable[_Union[LongProperty, _Mapping]]] = ..., batchedEntryDeletionIndexInfo: _Optional[_Iterable[_Union[BatchedEntryDeletionIndexInfo, _Mapping]]] = ..., individualDeletedMessageRanges: _Optional[_Iterable[_Union[LongListMap, _Mapping]]] = ...) -> None: ...

class ManagedCursorInfo(_message.Message):
    __slots__ = ("cursorsLedgerId", "markDeleteLedgerId", "markDeleteEntryId", "individualDeletedMessages", "properties", "lastActive", "batchedEntryDeletionIndexInfo", "cursorProperties")
    CURSORSLEDGERID_FIELD_NUMBER: _ClassVar[int]
    MARKDELETELEDGERID_FIELD_NUMBER: _ClassVar[int]
    MARKDELETEENTRYID_FIELD_NUMBER: _ClassVar[int]
    INDIVIDUALDELETEDMESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    LASTACTIVE_FIELD_NUMBER: _ClassVar[int]
    BATCHEDENTRYDELETIONINDEXINFO_FIELD_NUMBER: _ClassVar[int]
    CURSORPROPERTIES_FIELD_NUMBER: _ClassVar[int]
    cursorsLedgerId: int
    markDeleteLedgerId: int
    markDeleteEntryId: int
    individualDeletedMessages: _containers.RepeatedCompositeFieldContainer[MessageRange]
    properties: _containers.RepeatedCompositeFieldContainer[LongProperty]
    lastActive: int
    batchedEntryDeletionIndexInfo: _containers.RepeatedCompositeFieldContainer[BatchedEntryDeletionIndexInfo]
    cursorProperties: _containers.RepeatedCompositeFieldContainer[StringProperty]
    def __init__(self, cursorsLedgerId: _Optional[int] = ..., markDeleteLedgerId: _Optional[int] = ..., markDeleteEntryId: _Optional[int] = ..., individualDeletedMessages: _Optional[_Iterable[_Union[MessageRange, _Mapping]]] = ..., properties: _Optional[_Iterable[_Union[LongProperty, _Mapping]]] = ..., lastActive: _Optional[int] = ..., batchedEntryDeletionIndexInfo: _Optional[_Iterable[_Union[BatchedEntryDeletionIndexInfo, _Mapping]]] = ..., cursorProperties: _Optional[_Iterable[_Union[StringProperty, _Mapping]]] = ...) -> None: ...

class ManagedLedgerInfoMetadata(_message.Message):
    __slots__ = ("compressionType", "uncompressedSize")
    COMPRESSIONTYPE_FIELD_NUMBER: _ClassVar[int]
    UNCOMPRESSEDSIZE_FIELD_NUMBER: _ClassVar[int]
    compressionType: CompressionType
    uncompressedSize: int
    def __init__(self, compressionType: _Optional[_Union[CompressionType, str]] = ..., uncompressedSize: _Optional[int] = ...) -> None: ...

class ManagedCursorInfoMetadata(_message.Message):
    __slots__ = ("compressionType", "uncompressedSize")
    COMPRESSIONTYPE_FIELD_NUMBER: _ClassVar[int]
    UNCOMPRESSEDSIZE_FIELD_NUMBER: _ClassVar[int]
    compressionType: CompressionType
    uncompressedSize: int
    def __init__(self, compressionType: _Optional[_Union[CompressionType, str]] = ..., uncompressedSize: _Optional[int] = ...) -> None: ...
