"""EncryptedSerializer: what it stores, AES-EAX against known answers, and its refusals."""

from __future__ import annotations

import datetime as dt
import sys

import pytest

from engine.checkpoint.serde._aes_eax import AesEaxCipher, eax_decrypt, eax_encrypt
from engine.checkpoint.serde.encrypted import DecryptionError, EncryptedSerializer
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import SerializationError

KEY = b"0123456789abcdef0123456789abcdef"
OTHER_KEY = b"fedcba9876543210fedcba9876543210"

# The first vectors of the EAX paper (Bellare, Rogaway, Wagner 2004):
# (message, key, nonce, header, ciphertext followed by the tag).
EAX_VECTORS = [
    (
        "",
        "233952DEE4D5ED5F9B9C6D6FF80FF478",
        "62EC67F9C3A4A407FCB2A8C49031A8B3",
        "6BFB914FD07EAE6B",
        "E037830E8389F27B025A2D6527E79D01",
    ),
    (
        "F7FB",
        "91945D3F4DCBEE0BF45EF52255F095A4",
        "BECAF043B0A23D843194BA972C66DEBD",
        "FA3BFD4806EB53FA",
        "19DD5C4C9331049D0BDAB0277408F67967E5",
    ),
    (
        "1A47CB4933",
        "01F74AD64077F2E704C0F60ADA3DD523",
        "70C3DB4F0D26368400A10ED05D2BFF5E",
        "234A3463C1264AC6",
        "D851D5BAE03A59F238A23E39199DC9266626C40F80",
    ),
]

# Made by PyCryptodome (what LangGraph's from_pycryptodome_aes uses):
# AES.new(bytes(range(32)), AES.MODE_EAX, nonce=bytes(range(100, 116))) on
# b'{"hello": "world"}' * 5, stored as nonce + tag + ciphertext.
PYCRYPTODOME_KEY = bytes(range(32))
PYCRYPTODOME_PLAINTEXT = b'{"hello": "world"}' * 5
PYCRYPTODOME_PAYLOAD = bytes.fromhex(
    "6465666768696a6b6c6d6e6f70717273b7598ca02d953bb9d0ee688506bd31d3"
    "d2500071ed60c42967102ed2994e710baf838d607eeafc36446ed48e028b65e3"
    "67ae19971411ffb60aaa80b6e3dcdbdc5a1ef4f5c751642f1940366a25f075c7"
    "8d396d586744646e51205995d32ebba141d6fefc0b982bc95cd0"
)


def _serde(key: bytes = KEY) -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=key)


# -- AES-EAX --------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "key", "nonce", "header", "expected"), EAX_VECTORS)
def test_eax_matches_the_published_vectors(message, key, nonce, header, expected):
    args = (bytes.fromhex(key), bytes.fromhex(nonce))
    ciphertext, tag = eax_encrypt(*args, bytes.fromhex(message), bytes.fromhex(header))

    assert (ciphertext + tag).hex().upper() == expected
    assert eax_decrypt(*args, ciphertext, tag, bytes.fromhex(header)).hex().upper() == (
        message
    )


def test_payloads_have_pycryptodomes_layout():
    cipher = AesEaxCipher(PYCRYPTODOME_KEY)

    assert cipher.decrypt("aes", PYCRYPTODOME_PAYLOAD) == PYCRYPTODOME_PLAINTEXT
    name, payload = cipher.encrypt(PYCRYPTODOME_PLAINTEXT)
    assert name == "aes"
    assert len(payload) == 16 + 16 + len(PYCRYPTODOME_PLAINTEXT)
    assert cipher.decrypt("aes", payload) == PYCRYPTODOME_PLAINTEXT


def test_every_payload_gets_a_fresh_nonce():
    cipher = AesEaxCipher(KEY)

    assert cipher.encrypt(b"same")[1] != cipher.encrypt(b"same")[1]


# -- the serializer ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"messages": ["hi", "there"], "n": 3},
        None,
        b"\x00raw",
        ("a", 1),
        {1, 2},
        dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    ],
)
def test_values_round_trip(value):
    serde = _serde()

    assert serde.loads_typed(serde.dumps_typed(value)) == value


def test_type_tag_names_the_inner_type_and_the_cipher():
    serde = _serde()

    tag, payload = serde.dumps_typed({"secret": "launch code 1234"})

    assert tag == "json+aes"
    assert serde.dumps_typed(None)[0] == "null+aes"
    assert serde.dumps_typed(b"x")[0] == "bytes+aes"
    assert b"launch code" not in payload


def test_a_wrong_key_raises_instead_of_returning_garbage():
    stored = _serde().dumps_typed({"secret": 1})

    with pytest.raises(DecryptionError, match="key is wrong or the data was altered"):
        _serde(OTHER_KEY).loads_typed(stored)


def test_decryption_errors_are_serialization_errors_and_value_errors():
    assert issubclass(DecryptionError, SerializationError)
    assert issubclass(DecryptionError, ValueError)  # what PyCryptodome raises


def test_an_altered_payload_raises():
    tag, payload = _serde().dumps_typed({"amount": 100})
    altered = payload[:-1] + bytes([payload[-1] ^ 1])

    with pytest.raises(DecryptionError):
        _serde().loads_typed((tag, altered))
    with pytest.raises(DecryptionError, match="shorter than"):
        _serde().loads_typed((tag, payload[:20]))


def test_another_cipher_name_is_refused():
    tag, payload = _serde().dumps_typed({"amount": 100})

    with pytest.raises(DecryptionError, match="'rot13'"):
        _serde().loads_typed(("json+rot13", payload))


def test_data_stored_before_encryption_reads_as_plain():
    plain = JsonPlusSerializer().dumps_typed({"old": True})

    assert _serde().loads_typed(plain) == {"old": True}


def test_a_custom_cipher_and_inner_serializer():
    class Reverse:
        def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
            return "rev", plaintext[::-1]

        def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
            assert ciphername == "rev"
            return ciphertext[::-1]

    serde = EncryptedSerializer(Reverse(), JsonPlusSerializer())

    assert serde.dumps_typed([1, 2]) == ("json+rev", b"]2,1[")
    assert serde.loads_typed(("json+rev", b"]2,1[")) == [1, 2]


# -- from_pycryptodome_aes ----------------------------------------------------------------


def test_the_key_comes_from_LANGGRAPH_AES_KEY(monkeypatch):
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY.decode())

    stored = EncryptedSerializer.from_pycryptodome_aes().dumps_typed("x")

    assert _serde(KEY).loads_typed(stored) == "x"


def test_a_missing_or_bad_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    with pytest.raises(ValueError, match="LANGGRAPH_AES_KEY"):
        EncryptedSerializer.from_pycryptodome_aes()

    monkeypatch.setenv("LANGGRAPH_AES_KEY", "too short")
    with pytest.raises(ValueError, match="16, 24 or 32 bytes"):
        EncryptedSerializer.from_pycryptodome_aes()

    with pytest.raises(ValueError, match="got 5 bytes"):
        EncryptedSerializer.from_pycryptodome_aes(key=b"short")
    with pytest.raises(TypeError, match="must be bytes"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY.decode())


def test_only_eax_mode_and_known_options_are_accepted():
    assert EncryptedSerializer.from_pycryptodome_aes(key=KEY, mode=9)  # AES.MODE_EAX
    with pytest.raises(ValueError, match="EAX"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, mode=6)  # AES.MODE_GCM
    with pytest.raises(TypeError, match="mac_len"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, mac_len=8)


def test_without_cryptography_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "engine.checkpoint.serde._aes_eax", None)

    with pytest.raises(ImportError, match=r"graph-studio\[encryption\]"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY)
