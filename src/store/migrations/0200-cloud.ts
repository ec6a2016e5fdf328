import type { ColumnDefinitionBuilder, Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const cloudMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    const org = (c: ColumnDefinitionBuilder) =>
      c.notNull().references("organizations.id").onDelete("cascade");

    await db.schema
      .createTable("cloud_vms")
      .addColumn("uuid", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, org)
      .addColumn("location", "text", (c) => c.notNull())
      .addColumn("user_id", "integer", (c) => c.notNull())
      .addColumn("billing_account_id", "integer", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("description", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("vcpu", "integer", (c) => c.notNull())
      .addColumn("memory", "integer", (c) => c.notNull())
      .addColumn("hostname", "text", (c) => c.notNull())
      .addColumn("mac", "text", (c) => c.notNull())
      .addColumn("os_name", "text", (c) => c.notNull())
      .addColumn("os_version", "text", (c) => c.notNull())
      .addColumn("username", "text", (c) => c.notNull())
      .addColumn("password_hash", "text", (c) => c.notNull())
      .addColumn("public_key", "text", (c) => c.notNull())
      .addColumn("private_ipv4", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("cloud_vms_org_idx")
      .on("cloud_vms")
      .columns(["organization_id", "location", "created_at"])
      .execute();

    await db.schema
      .createTable("cloud_disks")
      .addColumn("uuid", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, org)
      .addColumn("location", "text", (c) => c.notNull())
      .addColumn("user_id", "integer", (c) => c.notNull())
      .addColumn("billing_account_id", "integer", (c) => c.notNull())
      .addColumn("display_name", "text", (c) => c.notNull())
      .addColumn("size_gb", "integer", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("source_image_type", "text", (c) => c.notNull())
      .addColumn("is_system", t.boolean, (c) => c.notNull())
      .addColumn("vm_uuid", t.uuid, (c) => c.references("cloud_vms.uuid").onDelete("set null"))
      .addColumn("device_name", "text")
      .addColumn("attached_at", t.timestamp)
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("cloud_disks_org_idx")
      .on("cloud_disks")
      .columns(["organization_id", "location", "created_at"])
      .execute();
    // One device name per VM: two concurrent attaches never get the same name.
    await db.schema
      .createIndex("cloud_disks_device_unique")
      .on("cloud_disks")
      .columns(["vm_uuid", "device_name"])
      .unique()
      .execute();

    await db.schema
      .createTable("cloud_private_addresses")
      .addColumn("location", "text", (c) => c.notNull())
      .addColumn("address", "text", (c) => c.notNull())
      .addColumn("resource_type", "text", (c) => c.notNull())
      .addColumn("resource_uuid", t.uuid, (c) => c.notNull())
      .addPrimaryKeyConstraint("cloud_private_addresses_pk", ["location", "address"])
      .execute();

    await t
      .serialId(db.schema.createTable("cloud_floating_ips"))
      .addColumn("organization_id", t.uuid, org)
      .addColumn("location", "text", (c) => c.notNull())
      .addColumn("address", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("user_id", "integer", (c) => c.notNull())
      .addColumn("billing_account_id", "integer", (c) => c.notNull())
      .addColumn("enabled", t.boolean, (c) => c.notNull())
      .addColumn("assigned_to", t.uuid)
      .addColumn("assigned_to_resource_type", "text")
      .addColumn("assigned_to_private_ip", "text")
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    // The store, not the code, guarantees an address is handed out once per location.
    await db.schema
      .createIndex("cloud_floating_ips_address_unique")
      .on("cloud_floating_ips")
      .columns(["location", "address"])
      .unique()
      .execute();
    await db.schema
      .createIndex("cloud_floating_ips_org_idx")
      .on("cloud_floating_ips")
      .columns(["organization_id", "location"])
      .execute();

    await db.schema
      .createTable("cloud_load_balancers")
      .addColumn("uuid", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, org)
      .addColumn("location", "text", (c) => c.notNull())
      .addColumn("user_id", "integer", (c) => c.notNull())
      .addColumn("billing_account_id", "integer", (c) => c.notNull())
      .addColumn("display_name", "text", (c) => c.notNull())
      .addColumn("private_address", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("cloud_load_balancers_org_idx")
      .on("cloud_load_balancers")
      .columns(["organization_id", "location", "created_at"])
      .execute();

    await db.schema
      .createTable("cloud_lb_rules")
      .addColumn("uuid", t.uuid, (c) => c.primaryKey())
      .addColumn("load_balancer_uuid", t.uuid, (c) =>
        c.notNull().references("cloud_load_balancers.uuid").onDelete("cascade"),
      )
      .addColumn("protocol", "text", (c) => c.notNull())
      .addColumn("source_port", "integer", (c) => c.notNull())
      .addColumn("target_port", "integer", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addUniqueConstraint("cloud_lb_rules_source_port_unique", ["load_balancer_uuid", "source_port"])
      .execute();

    await db.schema
      .createTable("cloud_lb_targets")
      .addColumn("load_balancer_uuid", t.uuid, (c) =>
        c.notNull().references("cloud_load_balancers.uuid").onDelete("cascade"),
      )
      .addColumn("target_uuid", t.uuid, (c) => c.notNull())
      .addColumn("target_type", "text", (c) => c.notNull())
      .addColumn("target_ip_address", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addPrimaryKeyConstraint("cloud_lb_targets_pk", ["load_balancer_uuid", "target_uuid"])
      .execute();
    await db.schema
      .createIndex("cloud_lb_targets_target_idx")
      .on("cloud_lb_targets")
      .column("target_uuid")
      .execute();

    await db.schema
      .createTable("cloud_s3_users")
      .addColumn("organization_id", t.uuid, (c) =>
        c.primaryKey().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("user_id", "text", (c) => c.notNull().unique())
      .addColumn("display_name", "text", (c) => c.notNull())
      .addColumn("email", "text", (c) => c.notNull())
      .addColumn("max_buckets", "integer", (c) => c.notNull())
      .addColumn("suspended", t.boolean, (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("cloud_s3_keys")
      .addColumn("access_key", "text", (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("cloud_s3_users.organization_id").onDelete("cascade"),
      )
      .addColumn("secret_encrypted", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("cloud_s3_keys_org_idx")
      .on("cloud_s3_keys")
      .column("organization_id")
      .execute();
  },
});
