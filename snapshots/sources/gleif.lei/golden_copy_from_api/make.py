#!/usr/bin/env python3
"""Writes a GLEIF golden copy (LEI-CDF 3.1 CSV) of the real LEI records GLEIF's API returned
for the 2025-05-15 00:00 UTC golden copy (../api_json_gleif-rs_2025-05 and the other
lei_records responses of the same capture under ../../../../../shared, copied into
lei_records.json here), one CSV row per LEI, in the column layout and quoting of GLEIF's
`*-gleif-goldencopy-lei2-golden-copy.csv`.

Why derived: the golden copy itself is ~2.8M LEIs in gigabytes; these 94 records are its real
rows for the LEIs they cover (the API serves the golden copy's content), mapped field by field
from the API's JSON to the CDF columns. Run: python3 make.py  (rewrites the .csv beside it).
"""
import csv
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "20250515-0000-gleif-goldencopy-lei2-golden-copy.csv")


def address_columns(prefix):
    return [f"{prefix}.{c}" for c in (
        "xmllang", "FirstAddressLine", "AddressNumber", "AddressNumberWithinBuilding",
        "MailRouting", "AdditionalAddressLine.1", "AdditionalAddressLine.2",
        "AdditionalAddressLine.3", "City", "Region", "Country", "PostalCode")]


COLUMNS = (
    ["LEI", "Entity.LegalName", "Entity.LegalName.xmllang"]
    + [f"Entity.OtherEntityNames.OtherEntityName.{i}{s}" for i in range(1, 6) for s in ("", ".xmllang", ".type")]
    + [f"Entity.TransliteratedOtherEntityNames.TransliteratedOtherEntityName.{i}{s}" for i in range(1, 6) for s in ("", ".xmllang", ".type")]
    + address_columns("Entity.LegalAddress")
    + address_columns("Entity.HeadquartersAddress")
    + ["Entity.OtherAddresses.OtherAddress.1.type"]
    + address_columns("Entity.OtherAddresses.OtherAddress.1")
    + ["Entity.RegistrationAuthority.RegistrationAuthorityID",
       "Entity.RegistrationAuthority.OtherRegistrationAuthorityID",
       "Entity.RegistrationAuthority.RegistrationAuthorityEntityID",
       "Entity.LegalJurisdiction", "Entity.EntityCategory", "Entity.EntitySubCategory",
       "Entity.LegalForm.EntityLegalFormCode", "Entity.LegalForm.OtherLegalForm",
       "Entity.AssociatedEntity.AssociatedLEI", "Entity.AssociatedEntity.AssociatedEntityName",
       "Entity.EntityStatus", "Entity.EntityCreationDate",
       "Entity.EntityExpirationDate", "Entity.EntityExpirationReason",
       "Entity.SuccessorEntity.SuccessorLEI", "Entity.SuccessorEntity.SuccessorEntityName"]
    + [f"Entity.LegalEntityEvents.LegalEntityEvent.{i}.{c}" for i in range(1, 3) for c in (
        "group_type", "event_status", "LegalEntityEventType", "LegalEntityEventEffectiveDate",
        "LegalEntityEventRecordedDate", "ValidationDocuments")]
    + ["Registration.InitialRegistrationDate", "Registration.LastUpdateDate",
       "Registration.RegistrationStatus", "Registration.NextRenewalDate",
       "Registration.ManagingLOU", "Registration.ValidationSources",
       "Registration.ValidationAuthority.ValidationAuthorityID",
       "Registration.ValidationAuthority.OtherValidationAuthorityID",
       "Registration.ValidationAuthority.ValidationAuthorityEntityID"]
    + [f"Registration.OtherValidationAuthorities.OtherValidationAuthority.1.{c}" for c in (
        "ValidationAuthorityID", "OtherValidationAuthorityID", "ValidationAuthorityEntityID")]
    + ["ConformityFlag"]
)


def put_address(row, prefix, a):
    if not a:
        return
    lines = a.get("addressLines") or []
    row[f"{prefix}.xmllang"] = a.get("language")
    row[f"{prefix}.FirstAddressLine"] = lines[0] if lines else None
    for i, extra in enumerate(lines[1:4], start=1):
        row[f"{prefix}.AdditionalAddressLine.{i}"] = extra
    for k, c in (("addressNumber", "AddressNumber"), ("addressNumberWithinBuilding", "AddressNumberWithinBuilding"),
                 ("mailRouting", "MailRouting"), ("city", "City"), ("region", "Region"),
                 ("country", "Country"), ("postalCode", "PostalCode")):
        row[f"{prefix}.{c}"] = a.get(k)


def to_row(lei, a):
    e, r = a["entity"], a["registration"]
    row = {"LEI": lei, "Entity.LegalName": e["legalName"]["name"],
           "Entity.LegalName.xmllang": e["legalName"].get("language")}
    for i, n in enumerate(e.get("otherNames") or [], start=1):
        p = f"Entity.OtherEntityNames.OtherEntityName.{i}"
        row[p], row[p + ".xmllang"], row[p + ".type"] = n["name"], n.get("language"), n.get("type")
    for i, n in enumerate(e.get("transliteratedOtherNames") or [], start=1):
        p = f"Entity.TransliteratedOtherEntityNames.TransliteratedOtherEntityName.{i}"
        row[p], row[p + ".xmllang"], row[p + ".type"] = n["name"], n.get("language"), n.get("type")
    put_address(row, "Entity.LegalAddress", e.get("legalAddress"))
    put_address(row, "Entity.HeadquartersAddress", e.get("headquartersAddress"))
    for o in (e.get("otherAddresses") or [])[:1]:
        p = "Entity.OtherAddresses.OtherAddress.1"
        row[p + ".type"] = o.get("type")
        put_address(row, p, o)
    ra = e.get("registeredAt") or {}
    row["Entity.RegistrationAuthority.RegistrationAuthorityID"] = ra.get("id")
    row["Entity.RegistrationAuthority.OtherRegistrationAuthorityID"] = ra.get("other")
    row["Entity.RegistrationAuthority.RegistrationAuthorityEntityID"] = e.get("registeredAs")
    row["Entity.LegalJurisdiction"] = e.get("jurisdiction")
    row["Entity.EntityCategory"] = e.get("category")
    row["Entity.EntitySubCategory"] = e.get("subCategory")
    lf = e.get("legalForm") or {}
    row["Entity.LegalForm.EntityLegalFormCode"] = lf.get("id")
    row["Entity.LegalForm.OtherLegalForm"] = lf.get("other")
    ae = e.get("associatedEntity") or {}
    row["Entity.AssociatedEntity.AssociatedLEI"] = ae.get("lei")
    row["Entity.AssociatedEntity.AssociatedEntityName"] = ae.get("name")
    row["Entity.EntityStatus"] = e.get("status")
    row["Entity.EntityCreationDate"] = e.get("creationDate")
    ex = e.get("expiration") or {}
    row["Entity.EntityExpirationDate"] = ex.get("date")
    row["Entity.EntityExpirationReason"] = ex.get("reason")
    se = e.get("successorEntity") or {}
    row["Entity.SuccessorEntity.SuccessorLEI"] = se.get("lei")
    row["Entity.SuccessorEntity.SuccessorEntityName"] = se.get("name")
    events = [(g.get("groupType"), ev) for g in e.get("eventGroups") or [] for ev in g.get("events") or []]
    for i, (group, ev) in enumerate(events[:2], start=1):
        p = f"Entity.LegalEntityEvents.LegalEntityEvent.{i}."
        row[p + "group_type"] = group
        row[p + "event_status"] = ev.get("status")
        row[p + "LegalEntityEventType"] = ev.get("type")
        row[p + "LegalEntityEventEffectiveDate"] = ev.get("effectiveDate")
        row[p + "LegalEntityEventRecordedDate"] = ev.get("recordedDate")
        row[p + "ValidationDocuments"] = ev.get("validationDocuments")
    row["Registration.InitialRegistrationDate"] = r.get("initialRegistrationDate")
    row["Registration.LastUpdateDate"] = r.get("lastUpdateDate")
    row["Registration.RegistrationStatus"] = r.get("status")
    row["Registration.NextRenewalDate"] = r.get("nextRenewalDate")
    row["Registration.ManagingLOU"] = r.get("managingLou")
    row["Registration.ValidationSources"] = r.get("corroborationLevel")
    va = r.get("validatedAt") or {}
    row["Registration.ValidationAuthority.ValidationAuthorityID"] = va.get("id")
    row["Registration.ValidationAuthority.OtherValidationAuthorityID"] = va.get("other")
    row["Registration.ValidationAuthority.ValidationAuthorityEntityID"] = r.get("validatedAs")
    for o in (r.get("otherValidationAuthorities") or [])[:1]:
        p = "Registration.OtherValidationAuthorities.OtherValidationAuthority.1."
        row[p + "ValidationAuthorityID"] = (o.get("validatedAt") or {}).get("id")
        row[p + "OtherValidationAuthorityID"] = (o.get("validatedAt") or {}).get("other")
        row[p + "ValidationAuthorityEntityID"] = o.get("validatedAs")
    row["ConformityFlag"] = a.get("conformityFlag")
    unknown = set(row) - set(COLUMNS)
    assert not unknown, unknown
    return [row.get(c) or "" for c in COLUMNS]


def main():
    records = json.load(open(os.path.join(HERE, "lei_records.json")))
    # In the order the responses gave them, not sorted: the adapter must not rely on order.
    with open(OUT, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
        w.writerow(COLUMNS)
        for lei, attributes in records:
            w.writerow(to_row(lei, attributes))


if __name__ == "__main__":
    main()
