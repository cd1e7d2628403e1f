import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.codecs.framing import FrameDecoder, frame
from bkctl.wire.errors import CodecError, FrameTooLarge

payloads = st.lists(st.binary(max_size=300), max_size=20)


@given(payloads, st.data())
def test_any_chunking_yields_the_same_frames(items, data):
    stream = b"".join(frame(p) for p in items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=30)))
    decoder = FrameDecoder(max_frame_size=300)
    out, last = [], 0
    for cut in cuts + [len(stream)]:
        out += decoder.feed(stream[last:cut])
        last = cut
    assert out == items
    assert decoder.buffered == 0


def test_one_byte_at_a_time():
    stream = frame(b"abc") + frame(b"") + frame(b"z" * 1000)
    decoder = FrameDecoder()
    out = []
    for i in range(len(stream)):
        out += decoder.feed(stream[i : i + 1])
    assert out == [b"abc", b"", b"z" * 1000]


def test_oversized_frame_is_rejected_before_it_is_buffered():
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(struct.pack(">i", 1025) + b"x" * 10)
    assert info.value.length == 1025 and info.value.limit == 1024
    assert decoder.buffered == 0
    # the stream has lost its framing: the decoder stays broken
    with pytest.raises(FrameTooLarge):
        decoder.feed(frame(b"ok"))


def test_default_limit_is_nettys_five_mebibytes():
    decoder = FrameDecoder()
    assert decoder.feed(frame(b"x" * (5 * 1024 * 1024))) == [b"x" * (5 * 1024 * 1024)]
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">i", 5 * 1024 * 1024 + 1))


def test_negative_length_is_a_codec_error():
    with pytest.raises(CodecError):
        FrameDecoder().feed(b"\xff\xff\xff\xfe")


@given(st.binary(max_size=2000), st.integers(1, 64))
def test_random_input_raises_only_codec_errors_and_stays_bounded(blob, chunk):
    decoder = FrameDecoder(max_frame_size=512)
    try:
        for i in range(0, len(blob), chunk):
            decoder.feed(blob[i : i + chunk])
            assert decoder.buffered <= 512 + 4
    except CodecError:
        pass


def test_frames_before_a_bad_length_are_delivered_then_the_error():
    decoder = FrameDecoder(max_frame_size=100)
    assert decoder.feed(frame(b"one") + frame(b"two") + struct.pack(">i", 101)) == [b"one", b"two"]
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"")


def _twins():
    """The Python twins, and the C ones (a comparison that fails when they are not built)."""
    from bkctl.wire import fastpath
    from tests.support import c_twins

    on = fastpath.build(True)
    return [
        pytest.param(fastpath.build(False), id="python"),
        pytest.param(on, id="c", marks=c_twins.needs_c(on.codec.c, "bkctl.wire.codecs._fastcodec")),
    ]


@pytest.mark.parametrize("twins", _twins())
@given(payloads, st.data())
def test_each_twin_cuts_any_chunking_into_the_same_frames_and_errors(twins, items, data):
    """The C twin (``_fastcodec.split_frames``) and the Python one (:func:`split_frames`) give
    the same frames and the same errors, a bad length anywhere in a chunk included."""
    stream = b"".join(frame(p) for p in items)
    if data.draw(st.booleans()):
        stream += struct.pack(">i", data.draw(st.sampled_from([-1, 301, 2**31 - 1])))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=30)))

    def decode(decoder):
        out, last = [], 0
        try:
            for cut in cuts + [len(stream)]:
                out += decoder.feed(stream[last:cut])
                last = cut
            out += decoder.feed(b"")
        except CodecError as exc:
            return out, type(exc), str(exc)
        return out, None, decoder.buffered

    got = decode(FrameDecoder(max_frame_size=300, split=twins.codec.split_frames))
    assert got == decode(FrameDecoder(max_frame_size=300))
    assert got[0] == items
