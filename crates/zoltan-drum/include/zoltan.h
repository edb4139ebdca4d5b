/*
 * zoltan.h of libzoltan_drum (drum-rs): the Zoltan interface for geometric load balancing
 * that libzoltan_drum implements, declared with Zoltan's names and types so that a program
 * written for Zoltan compiles against it unchanged and links with -lzoltan_drum.
 *
 * Written for drum-rs. The declarations follow Zoltan's published interface (Zoltan User's
 * Guide, version 3.90); `cargo xtask ci` compiles this file together with the real Zoltan's
 * zoltan.h (every declaration must agree with Zoltan's) and tests/header.rs checks it against
 * the library's exports. Parameters and differences from Zoltan: crates/zoltan-drum/README.md.
 */
#ifndef ZOLTAN_DRUM_ZOLTAN_H
#define ZOLTAN_DRUM_ZOLTAN_H

#include <mpi.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZOLTAN_VERSION_NUMBER 3.90

/* Return codes. */
#define ZOLTAN_OK 0
#define ZOLTAN_WARN 1
#define ZOLTAN_FATAL -1
#define ZOLTAN_MEMERR -2

/* Global and local ids: arrays of NUM_GID_ENTRIES (NUM_LID_ENTRIES) unsigned ints. */
typedef unsigned int ZOLTAN_ID_TYPE;
typedef ZOLTAN_ID_TYPE *ZOLTAN_ID_PTR;
#define ZOLTAN_ID_MPI_TYPE MPI_UNSIGNED
#define ZOLTAN_ID_SPEC "%u"
#define ZOLTAN_ID_CONSTANT(z) z

/* The load-balancing structure (opaque). */
struct Zoltan_Struct;

/* Query functions the application registers. */
typedef int ZOLTAN_NUM_OBJ_FN(void *data, int *ierr);
typedef void ZOLTAN_OBJ_LIST_FN(void *data, int num_gid_entries, int num_lid_entries,
                                ZOLTAN_ID_PTR global_ids, ZOLTAN_ID_PTR local_ids, int wdim,
                                float *objwgts, int *ierr);
typedef int ZOLTAN_NUM_GEOM_FN(void *data, int *ierr);
typedef void ZOLTAN_GEOM_MULTI_FN(void *data, int num_gid_entries, int num_lid_entries,
                                  int num_obj, ZOLTAN_ID_PTR global_id, ZOLTAN_ID_PTR local_id,
                                  int num_dim, double *geom_vec, int *ierr);
typedef void ZOLTAN_GEOM_FN(void *data, int num_gid_entries, int num_lid_entries,
                            ZOLTAN_ID_PTR global_id, ZOLTAN_ID_PTR local_id, double *geom_vec,
                            int *ierr);
typedef int ZOLTAN_OBJ_SIZE_FN(void *data, int num_gid_entries, int num_lid_entries,
                               ZOLTAN_ID_PTR global_id, ZOLTAN_ID_PTR local_id, int *ierr);
typedef void ZOLTAN_OBJ_SIZE_MULTI_FN(void *data, int num_gid_entries, int num_lid_entries,
                                      int num_ids, ZOLTAN_ID_PTR global_ids,
                                      ZOLTAN_ID_PTR local_ids, int *num_bytes, int *ierr);
typedef void ZOLTAN_PACK_OBJ_FN(void *data, int num_gid_entries, int num_lid_entries,
                                ZOLTAN_ID_PTR global_id, ZOLTAN_ID_PTR local_id, int dest_proc,
                                int size, char *buf, int *ierr);
typedef void ZOLTAN_PACK_OBJ_MULTI_FN(void *data, int num_gid_entries, int num_lid_entries,
                                      int num_ids, ZOLTAN_ID_PTR global_ids,
                                      ZOLTAN_ID_PTR local_ids, int *dest_proc, int *size,
                                      int *index, char *buffer, int *ierr);
typedef void ZOLTAN_UNPACK_OBJ_FN(void *data, int num_gid_entries, ZOLTAN_ID_PTR global_id,
                                  int size, char *buf, int *ierr);
typedef void ZOLTAN_UNPACK_OBJ_MULTI_FN(void *data, int num_gid_entries, int num_ids,
                                        ZOLTAN_ID_PTR global_ids, int *size, int *index,
                                        char *buffer, int *ierr);
typedef void ZOLTAN_PRE_MIGRATE_PP_FN(void *data, int num_gid_entries, int num_lid_entries,
                                      int num_import, ZOLTAN_ID_PTR import_global_ids,
                                      ZOLTAN_ID_PTR import_local_ids, int *import_procs,
                                      int *import_to_part, int num_export,
                                      ZOLTAN_ID_PTR export_global_ids,
                                      ZOLTAN_ID_PTR export_local_ids, int *export_procs,
                                      int *export_to_part, int *ierr);
typedef void ZOLTAN_MID_MIGRATE_PP_FN(void *data, int num_gid_entries, int num_lid_entries,
                                      int num_import, ZOLTAN_ID_PTR import_global_ids,
                                      ZOLTAN_ID_PTR import_local_ids, int *import_procs,
                                      int *import_to_part, int num_export,
                                      ZOLTAN_ID_PTR export_global_ids,
                                      ZOLTAN_ID_PTR export_local_ids, int *export_procs,
                                      int *export_to_part, int *ierr);
typedef void ZOLTAN_POST_MIGRATE_PP_FN(void *data, int num_gid_entries, int num_lid_entries,
                                       int num_import, ZOLTAN_ID_PTR import_global_ids,
                                       ZOLTAN_ID_PTR import_local_ids, int *import_procs,
                                       int *import_to_part, int num_export,
                                       ZOLTAN_ID_PTR export_global_ids,
                                       ZOLTAN_ID_PTR export_local_ids, int *export_procs,
                                       int *export_to_part, int *ierr);

/* Set-up. MPI must be initialised before Zoltan_Initialize. */
extern int Zoltan_Initialize(int argc, char **argv, float *ver);
extern struct Zoltan_Struct *Zoltan_Create(MPI_Comm communicator);
extern void Zoltan_Destroy(struct Zoltan_Struct **zz);
extern int Zoltan_Set_Param(struct Zoltan_Struct *zz, const char *name, const char *val);

/* Registering query functions. */
extern int Zoltan_Set_Num_Obj_Fn(struct Zoltan_Struct *zz, ZOLTAN_NUM_OBJ_FN *fn_ptr,
                                 void *data_ptr);
extern int Zoltan_Set_Obj_List_Fn(struct Zoltan_Struct *zz, ZOLTAN_OBJ_LIST_FN *fn_ptr,
                                  void *data_ptr);
extern int Zoltan_Set_Num_Geom_Fn(struct Zoltan_Struct *zz, ZOLTAN_NUM_GEOM_FN *fn_ptr,
                                  void *data_ptr);
extern int Zoltan_Set_Geom_Multi_Fn(struct Zoltan_Struct *zz, ZOLTAN_GEOM_MULTI_FN *fn_ptr,
                                    void *data_ptr);
extern int Zoltan_Set_Geom_Fn(struct Zoltan_Struct *zz, ZOLTAN_GEOM_FN *fn_ptr, void *data_ptr);
extern int Zoltan_Set_Obj_Size_Fn(struct Zoltan_Struct *zz, ZOLTAN_OBJ_SIZE_FN *fn_ptr,
                                  void *data_ptr);
extern int Zoltan_Set_Obj_Size_Multi_Fn(struct Zoltan_Struct *zz,
                                        ZOLTAN_OBJ_SIZE_MULTI_FN *fn_ptr, void *data_ptr);
extern int Zoltan_Set_Pack_Obj_Fn(struct Zoltan_Struct *zz, ZOLTAN_PACK_OBJ_FN *fn_ptr,
                                  void *data_ptr);
extern int Zoltan_Set_Pack_Obj_Multi_Fn(struct Zoltan_Struct *zz,
                                        ZOLTAN_PACK_OBJ_MULTI_FN *fn_ptr, void *data_ptr);
extern int Zoltan_Set_Unpack_Obj_Fn(struct Zoltan_Struct *zz, ZOLTAN_UNPACK_OBJ_FN *fn_ptr,
                                    void *data_ptr);
extern int Zoltan_Set_Unpack_Obj_Multi_Fn(struct Zoltan_Struct *zz,
                                          ZOLTAN_UNPACK_OBJ_MULTI_FN *fn_ptr, void *data_ptr);
extern int Zoltan_Set_Pre_Migrate_PP_Fn(struct Zoltan_Struct *zz,
                                        ZOLTAN_PRE_MIGRATE_PP_FN *fn_ptr, void *data_ptr);
extern int Zoltan_Set_Mid_Migrate_PP_Fn(struct Zoltan_Struct *zz,
                                        ZOLTAN_MID_MIGRATE_PP_FN *fn_ptr, void *data_ptr);
extern int Zoltan_Set_Post_Migrate_PP_Fn(struct Zoltan_Struct *zz,
                                         ZOLTAN_POST_MIGRATE_PP_FN *fn_ptr, void *data_ptr);

/* Load balancing. */
extern int Zoltan_LB_Set_Part_Sizes(struct Zoltan_Struct *zz, int global_num, int len,
                                    int *part_ids, int *wgt_idx, float *part_sizes);
extern int Zoltan_LB_Partition(struct Zoltan_Struct *zz, int *changes, int *num_gid_entries,
                               int *num_lid_entries, int *num_import,
                               ZOLTAN_ID_PTR *import_global_ids,
                               ZOLTAN_ID_PTR *import_local_ids, int **import_procs,
                               int **import_to_part, int *num_export,
                               ZOLTAN_ID_PTR *export_global_ids,
                               ZOLTAN_ID_PTR *export_local_ids, int **export_procs,
                               int **export_to_part);
extern int Zoltan_LB_Balance(struct Zoltan_Struct *zz, int *changes, int *num_gid_entries,
                             int *num_lid_entries, int *num_import,
                             ZOLTAN_ID_PTR *import_global_ids, ZOLTAN_ID_PTR *import_local_ids,
                             int **import_procs, int *num_export,
                             ZOLTAN_ID_PTR *export_global_ids, ZOLTAN_ID_PTR *export_local_ids,
                             int **export_procs);
extern int Zoltan_LB_Free_Part(ZOLTAN_ID_PTR *global_ids, ZOLTAN_ID_PTR *local_ids, int **procs,
                               int **to_part);

/* Augmenting a decomposition (KEEP_CUTS=1; HSFC, RCB, RIB). */
extern int Zoltan_LB_Point_Assign(struct Zoltan_Struct *zz, double *coords, int *proc);
extern int Zoltan_LB_Point_PP_Assign(struct Zoltan_Struct *zz, double *coords, int *proc,
                                     int *part);
extern int Zoltan_LB_Box_Assign(struct Zoltan_Struct *zz, double xmin, double ymin, double zmin,
                                double xmax, double ymax, double zmax, int *procs,
                                int *numprocs);
extern int Zoltan_LB_Box_PP_Assign(struct Zoltan_Struct *zz, double xmin, double ymin,
                                   double zmin, double xmax, double ymax, double zmax,
                                   int *procs, int *numprocs, int *parts, int *numparts);

/* Migration. */
extern int Zoltan_Migrate(struct Zoltan_Struct *zz, int num_import,
                          ZOLTAN_ID_PTR import_global_ids, ZOLTAN_ID_PTR import_local_ids,
                          int *import_procs, int *import_to_part, int num_export,
                          ZOLTAN_ID_PTR export_global_ids, ZOLTAN_ID_PTR export_local_ids,
                          int *export_procs, int *export_to_part);

#ifdef __cplusplus
}
#endif

#endif /* ZOLTAN_DRUM_ZOLTAN_H */
