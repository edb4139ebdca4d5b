/*
 * Proves that libzoltan_drum's declarations are Zoltan's: the real zoltan.h is included first
 * (-I/usr/include/trilinos), then ours by path; C rejects a second declaration of a function
 * or typedef with a different type, and -Werror rejects a macro defined differently. Linked
 * against libzoltan_drum, each entry point is also taken as a pointer of Zoltan's declared
 * type, so a missing symbol fails the link. Built and run by `cargo xtask ci`.
 */
#include <stdio.h>
#include <zoltan.h>
#include "../include/zoltan.h"


int main(void) {
  /* Each assignment has Zoltan's declared type on the left. */
  int (*init)(int, char **, float *) = Zoltan_Initialize;
  struct Zoltan_Struct *(*create)(MPI_Comm) = Zoltan_Create;
  void (*destroy)(struct Zoltan_Struct **) = Zoltan_Destroy;
  int (*set_param)(struct Zoltan_Struct *, const char *, const char *) = Zoltan_Set_Param;
  int (*num_obj)(struct Zoltan_Struct *, ZOLTAN_NUM_OBJ_FN *, void *) = Zoltan_Set_Num_Obj_Fn;
  int (*obj_list)(struct Zoltan_Struct *, ZOLTAN_OBJ_LIST_FN *, void *) = Zoltan_Set_Obj_List_Fn;
  int (*num_geom)(struct Zoltan_Struct *, ZOLTAN_NUM_GEOM_FN *, void *) = Zoltan_Set_Num_Geom_Fn;
  int (*geom_multi)(struct Zoltan_Struct *, ZOLTAN_GEOM_MULTI_FN *, void *) =
      Zoltan_Set_Geom_Multi_Fn;
  int (*geom)(struct Zoltan_Struct *, ZOLTAN_GEOM_FN *, void *) = Zoltan_Set_Geom_Fn;
  int (*size)(struct Zoltan_Struct *, ZOLTAN_OBJ_SIZE_FN *, void *) = Zoltan_Set_Obj_Size_Fn;
  int (*size_multi)(struct Zoltan_Struct *, ZOLTAN_OBJ_SIZE_MULTI_FN *, void *) =
      Zoltan_Set_Obj_Size_Multi_Fn;
  int (*pack)(struct Zoltan_Struct *, ZOLTAN_PACK_OBJ_FN *, void *) = Zoltan_Set_Pack_Obj_Fn;
  int (*pack_multi)(struct Zoltan_Struct *, ZOLTAN_PACK_OBJ_MULTI_FN *, void *) =
      Zoltan_Set_Pack_Obj_Multi_Fn;
  int (*unpack)(struct Zoltan_Struct *, ZOLTAN_UNPACK_OBJ_FN *, void *) = Zoltan_Set_Unpack_Obj_Fn;
  int (*unpack_multi)(struct Zoltan_Struct *, ZOLTAN_UNPACK_OBJ_MULTI_FN *, void *) =
      Zoltan_Set_Unpack_Obj_Multi_Fn;
  int (*pre)(struct Zoltan_Struct *, ZOLTAN_PRE_MIGRATE_PP_FN *, void *) =
      Zoltan_Set_Pre_Migrate_PP_Fn;
  int (*mid)(struct Zoltan_Struct *, ZOLTAN_MID_MIGRATE_PP_FN *, void *) =
      Zoltan_Set_Mid_Migrate_PP_Fn;
  int (*post)(struct Zoltan_Struct *, ZOLTAN_POST_MIGRATE_PP_FN *, void *) =
      Zoltan_Set_Post_Migrate_PP_Fn;
  int (*sizes)(struct Zoltan_Struct *, int, int, int *, int *, float *) =
      Zoltan_LB_Set_Part_Sizes;
  int (*partition)(struct Zoltan_Struct *, int *, int *, int *, int *, ZOLTAN_ID_PTR *,
                   ZOLTAN_ID_PTR *, int **, int **, int *, ZOLTAN_ID_PTR *, ZOLTAN_ID_PTR *,
                   int **, int **) = Zoltan_LB_Partition;
  int (*balance)(struct Zoltan_Struct *, int *, int *, int *, int *, ZOLTAN_ID_PTR *,
                 ZOLTAN_ID_PTR *, int **, int *, ZOLTAN_ID_PTR *, ZOLTAN_ID_PTR *, int **) =
      Zoltan_LB_Balance;
  int (*free_part)(ZOLTAN_ID_PTR *, ZOLTAN_ID_PTR *, int **, int **) = Zoltan_LB_Free_Part;
  int (*point)(struct Zoltan_Struct *, double *, int *) = Zoltan_LB_Point_Assign;
  int (*point_pp)(struct Zoltan_Struct *, double *, int *, int *) = Zoltan_LB_Point_PP_Assign;
  int (*box)(struct Zoltan_Struct *, double, double, double, double, double, double, int *,
             int *) = Zoltan_LB_Box_Assign;
  int (*box_pp)(struct Zoltan_Struct *, double, double, double, double, double, double, int *,
                int *, int *, int *) = Zoltan_LB_Box_PP_Assign;
  int (*migrate)(struct Zoltan_Struct *, int, ZOLTAN_ID_PTR, ZOLTAN_ID_PTR, int *, int *, int,
                 ZOLTAN_ID_PTR, ZOLTAN_ID_PTR, int *, int *) = Zoltan_Migrate;
  const void *all[] = {
      (const void *)init,       (const void *)create,     (const void *)destroy,
      (const void *)set_param,  (const void *)num_obj,    (const void *)obj_list,
      (const void *)num_geom,   (const void *)geom_multi, (const void *)geom,
      (const void *)size,       (const void *)size_multi, (const void *)pack,
      (const void *)pack_multi, (const void *)unpack,     (const void *)unpack_multi,
      (const void *)pre,        (const void *)mid,        (const void *)post,
      (const void *)sizes,      (const void *)partition,  (const void *)balance,
      (const void *)free_part,  (const void *)point,      (const void *)point_pp,
      (const void *)box,        (const void *)box_pp,     (const void *)migrate,
  };
  size_t n = sizeof all / sizeof all[0];
  for (size_t i = 0; i < n; i++) {
    if (all[i] == NULL) {
      printf("abi_check: entry point %zu is NULL\n", i);
      return 1;
    }
  }
  printf("abi_check: %zu entry points with Zoltan's declared types (ZOLTAN_VERSION_NUMBER %.2f)\n",
         n, (double)ZOLTAN_VERSION_NUMBER);
  return 0;
}
